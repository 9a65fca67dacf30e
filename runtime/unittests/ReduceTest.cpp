// mrt_sum_rows_f32: every row lands in its column, accumulated in double.
#include "megatron_rt/reduce.h"

#include <gtest/gtest.h>

#include <vector>

TEST(SumRows, EachColumnSumsItsRows) {
  const int64_t rows = 1000, cols = 7;
  std::vector<float> x(rows * cols), out(cols, -1.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[r * cols + c] = static_cast<float>(c + 1) + 0.001f * (r % 10);
  mrt_sum_rows_f32(x.data(), rows, cols, out.data());
  for (int64_t c = 0; c < cols; ++c) {
    double want = 0.0;
    for (int64_t r = 0; r < rows; ++r)
      want += x[r * cols + c];
    EXPECT_FLOAT_EQ(out[c], static_cast<float>(want)) << "column " << c;
  }
}

TEST(SumRows, ManySmallTermsKeepFp32Accuracy) {
  // 2^24 + 2 ones: a float running sum stops at 2^24, while 2^24 + 2 is a
  // float (2^24 + 1, which rounds to 2^24, would not tell them apart).
  const int64_t rows = (1 << 24) + 2;
  std::vector<float> x(rows, 1.0f);
  float out = 0.0f;
  mrt_sum_rows_f32(x.data(), rows, 1, &out);
  EXPECT_EQ(out, 16777218.0f);
}

TEST(SumRows, NoRowsGiveZeros) {
  float out[3] = {5, 5, 5};
  mrt_sum_rows_f32(nullptr, 0, 3, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
}
