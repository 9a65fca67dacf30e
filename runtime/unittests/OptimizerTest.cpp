#include "megatron_rt/optimizer.h"

#include "TestUtil.h"

using namespace mrt_test;

namespace {

TEST(SumSquaresTest, MatchesDoubleSum) {
  auto x = randomVector(100003, 71, -3.0f, 3.0f);
  double expected = 0.0;
  for (float v : x)
    expected += double(v) * v;
  double sums[2] = {-1.0, -1.0};
  mrt_sum_squares_f32(x.data(), x.size(), sums, 1);
  EXPECT_TRUE(relativelyClose(sums[1], expected, 1e-12));
  EXPECT_EQ(sums[0], -1.0);
}

// Fewer elements than the kernel's running sums: only the tail loop runs.
TEST(SumSquaresTest, ShorterThanOneBlock) {
  const float x[5] = {1.0f, -2.0f, 3.0f, 0.5f, -0.25f};
  double sum = -1.0;
  mrt_sum_squares_f32(x, 5, &sum, 0);
  EXPECT_EQ(sum, 14.3125);
}

TEST(SumSquaresTest, EmptyTensorWritesZero) {
  double sum = -1.0;
  mrt_sum_squares_f32(nullptr, 0, &sum, 0);
  EXPECT_EQ(sum, 0.0);
}

TEST(SumF64Test, AddsInIndexOrder) {
  // 1 + 2^-53 rounds to 1; 1 + (2^-53 + 2^-53) does not.
  const double tiny = 0x1p-53;
  const double forward[3] = {1.0, tiny, tiny}, backward[3] = {tiny, tiny, 1.0};
  EXPECT_EQ(mrt_sum_f64(forward, 3), 1.0);
  EXPECT_EQ(mrt_sum_f64(backward, 3), 1.0 + 2 * tiny);
}

} // namespace
