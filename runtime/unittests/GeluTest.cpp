#include "megatron_rt/gelu.h"

#include "TestUtil.h"

using namespace mrt_test;

namespace {

double geluRef(double x) {
  const double pi = 3.14159265358979323846;
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

// Central difference of the double reference, so the kernel's derivative is
// checked independently of its hand-derived formula.
double geluGradRef(double x) {
  const double h = 1e-5;
  return (geluRef(x + h) - geluRef(x - h)) / (2 * h);
}

constexpr int64_t kN = 1001;

TEST(GeluTest, ForwardMatchesNaive) {
  auto x = randomVector(kN, 21, -6.0f, 6.0f);
  std::vector<float> y(kN);
  mrt_gelu_fwd_f32(x.data(), y.data(), kN);
  std::vector<double> expected(kN);
  for (int64_t i = 0; i < kN; ++i)
    expected[i] = geluRef(x[i]);
  EXPECT_TRUE(allClose(y, expected));
}

TEST(GeluTest, BackwardMatchesFiniteDifferences) {
  auto x = randomVector(kN, 22, -6.0f, 6.0f), dy = randomVector(kN, 23);
  std::vector<float> dx(kN);
  mrt_gelu_bwd_f32(x.data(), dy.data(), dx.data(), kN);
  std::vector<double> expected(kN);
  for (int64_t i = 0; i < kN; ++i)
    expected[i] = dy[i] * geluGradRef(x[i]);
  EXPECT_TRUE(allClose(dx, expected));
}

constexpr int64_t kRows = 9, kCols = 35;

TEST(BiasGeluTest, ForwardMatchesNaive) {
  auto x = randomVector(kRows * kCols, 24, -4.0f, 4.0f);
  auto bias = randomVector(kCols, 25);
  std::vector<float> y(x.size());
  mrt_bias_gelu_fwd_f32(x.data(), bias.data(), y.data(), kRows, kCols);
  std::vector<double> expected(x.size());
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kCols; ++c)
      expected[r * kCols + c] = geluRef(double(x[r * kCols + c]) + bias[c]);
  EXPECT_TRUE(allClose(y, expected));
}

TEST(BiasGeluTest, BackwardMatchesNaiveAndAccumulatesBiasGrad) {
  auto x = randomVector(kRows * kCols, 26, -4.0f, 4.0f);
  auto bias = randomVector(kCols, 27), dy = randomVector(x.size(), 28);
  auto dbias = randomVector(kCols, 29);
  std::vector<double> dxRef(x.size()), dbiasRef = toDouble(dbias);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kCols; ++c) {
      int64_t i = r * kCols + c;
      dxRef[i] = dy[i] * geluGradRef(double(x[i]) + bias[c]);
      dbiasRef[c] += dxRef[i];
    }
  std::vector<float> dx(x.size());
  mrt_bias_gelu_bwd_f32(x.data(), bias.data(), dy.data(), dx.data(),
                        dbias.data(), kRows, kCols);
  EXPECT_TRUE(allClose(dx, dxRef));
  EXPECT_TRUE(allClose(dbias, dbiasRef));
}

} // namespace
