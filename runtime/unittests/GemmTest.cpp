#include "megatron_rt/contract.h"
#include "megatron_rt/gemm.h"

#include "TestUtil.h"

#include <cstdlib>
#include <limits>
#include <string>

using namespace mrt_test;

namespace {

// M = 1 (decoding one token) runs as a matrix-vector product.
struct GemmCase {
  bool transA, transB;
  int64_t M = 37;
};

class GemmTest : public ::testing::TestWithParam<GemmCase> {};

// Element (i, j) of op(X) for a row-major X with leading dimension ld.
double opAt(const std::vector<float> &x, int64_t ld, bool trans, int64_t i,
            int64_t j) {
  return trans ? x[j * ld + i] : x[i * ld + j];
}

TEST_P(GemmTest, MatchesNaiveProductWithPaddedLeadingDimensions) {
  const auto [transA, transB, M] = GetParam();
  const int64_t N = 29, K = 53;
  // Leading dimensions larger than the logical rows catch ld mix-ups.
  const int64_t aRows = transA ? K : M, aCols = transA ? M : K;
  const int64_t bRows = transB ? N : K, bCols = transB ? K : N;
  const int64_t lda = aCols + 3, ldb = bCols + 5, ldc = N + 2;
  auto A = randomVector(aRows * lda, 1), B = randomVector(bRows * ldb, 2);
  auto C = randomVector(M * ldc, 3);
  const float alpha = 0.7f, beta = 0.3f;

  std::vector<double> expected = toDouble(C);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0.0;
      for (int64_t k = 0; k < K; ++k)
        sum += opAt(A, lda, transA, i, k) * opAt(B, ldb, transB, k, j);
      expected[i * ldc + j] = alpha * sum + beta * C[i * ldc + j];
    }

  mrt_gemm_f32(transA, transB, M, N, K, alpha, A.data(), lda, B.data(), ldb,
               beta, C.data(), ldc);
  EXPECT_TRUE(allClose(C, expected));
}

INSTANTIATE_TEST_SUITE_P(
    AllTranspositions, GemmTest,
    ::testing::Values(GemmCase{false, false}, GemmCase{true, false},
                      GemmCase{false, true}, GemmCase{true, true},
                      GemmCase{false, false, 1}, GemmCase{true, false, 1},
                      GemmCase{false, true, 1}, GemmCase{true, true, 1}),
    [](const auto &info) {
      return std::string(info.param.transA ? "T" : "N") +
             (info.param.transB ? "T" : "N") + "_M" +
             std::to_string(info.param.M);
    });

// Every row gains the bias; C's previous contents (NaN) are never read and
// the padding past N keeps its value.
TEST_P(GemmTest, BiasIsAddedToEveryRow) {
  const auto [transA, transB, caseRows] = GetParam();
  const int64_t M = caseRows == 1 ? 1 : 6, N = 9, K = 4, ldc = N + 1;
  auto A = randomVector(M * K, 6), B = randomVector(K * N, 7);
  auto bias = randomVector(N, 8);
  std::vector<float> C(M * ldc, std::numeric_limits<float>::quiet_NaN());
  C[ldc - 1] = 42.0f;
  std::vector<double> expected(M * N);
  const int64_t lda = transA ? M : K, ldb = transB ? K : N;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = bias[j];
      for (int64_t k = 0; k < K; ++k)
        sum += opAt(A, lda, transA, i, k) * opAt(B, ldb, transB, k, j);
      expected[i * N + j] = sum;
    }
  mrt_gemm_bias_f32(transA, transB, M, N, K, A.data(), lda, B.data(), ldb,
                    bias.data(), C.data(), ldc);
  std::vector<float> rows;
  for (int64_t i = 0; i < M; ++i)
    rows.insert(rows.end(), C.begin() + i * ldc, C.begin() + i * ldc + N);
  EXPECT_TRUE(allClose(rows, expected));
  EXPECT_EQ(C[ldc - 1], 42.0f);
}

// pre is the biased product, out its GELU; without pre, out alone.
TEST(GemmBiasGeluTest, KeepsGeluInputAndWritesGelu) {
  const int64_t M = 5, N = 8, K = 6;
  auto A = randomVector(M * K, 9), B = randomVector(K * N, 10);
  auto bias = randomVector(N, 11);
  std::vector<float> want(M * N), pre(M * N), out(M * N), alone(M * N);
  mrt_gemm_bias_f32(0, 0, M, N, K, A.data(), K, B.data(), N, bias.data(),
                    want.data(), N);
  std::vector<double> gelu(M * N);
  for (int64_t i = 0; i < M * N; ++i) {
    const double x = want[i];
    gelu[i] = 0.5 * x *
              (1.0 + std::tanh(MGT_GELU_SQRT_2_OVER_PI *
                               (x + MGT_GELU_CUBIC * x * x * x)));
  }
  mrt_gemm_bias_gelu_f32(0, 0, M, N, K, A.data(), K, B.data(), N, bias.data(),
                         pre.data(), out.data(), N);
  mrt_gemm_bias_gelu_f32(0, 0, M, N, K, A.data(), K, B.data(), N, bias.data(),
                         nullptr, alone.data(), N);
  EXPECT_EQ(pre, want);
  EXPECT_TRUE(allClose(out, gelu));
  EXPECT_EQ(alone, out);
}

class GemmBetaZeroTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(GemmBetaZeroTest, IgnoresPreviousContentsOfC) {
  const int64_t M = GetParam(), N = 7, K = 3;
  auto A = randomVector(M * K, 4), B = randomVector(K * N, 5);
  std::vector<float> C(M * N, std::numeric_limits<float>::quiet_NaN());
  std::vector<double> expected(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k)
        expected[i * N + j] += double(A[i * K + k]) * B[k * N + j];
  mrt_gemm_f32(0, 0, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(),
               N);
  EXPECT_TRUE(allClose(C, expected));
}

// One row (a decoding step's matrix-vector product) must not read C either.
INSTANTIATE_TEST_SUITE_P(Rows, GemmBetaZeroTest, ::testing::Values(5, 1));

// A leading dimension shorter than a row is a caller's bug: oneDNN refuses
// it and the process stops with the shapes named, instead of reading past
// every row. The library is chosen once per process, so the child that dies
// runs this test alone (threadsafe style) with MRT_GEMM set before its
// first GEMM.
TEST(GemmDeathTest, OneDNNRefusalStops) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> A(4 * 3, 1.0f), B(3 * 2, 1.0f), C(4 * 2);
  EXPECT_DEATH(
      {
        setenv("MRT_GEMM", "onednn", 1);
        mrt_gemm_f32(0, 0, 4, 2, 3, 1.0f, A.data(), /*lda=*/2, B.data(), 2,
                     0.0f, C.data(), 2);
      },
      "mrt_gemm_f32: oneDNN sgemm of \\[4 x 3\\] x \\[3 x 2\\] failed");
}

TEST(GemmDeathTest, UnknownLibraryStops) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> A(2 * 2, 1.0f), B(2 * 2, 1.0f), C(2 * 2);
  EXPECT_DEATH(
      {
        setenv("MRT_GEMM", "mkl", 1);
        mrt_gemm_f32(0, 0, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f,
                     C.data(), 2);
      },
      "MRT_GEMM=mkl: expected onednn or openblas");
}

} // namespace
