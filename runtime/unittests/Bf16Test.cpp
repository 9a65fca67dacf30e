// The CPU runtime's bf16 storage: rounding, and the _bf16 entry points as
// their f32 siblings on widened operands. The GEMMs run on the engine the
// process chose (oneDNN's bf16 matmul where the CPU has one): on data whose
// sums are exact in fp32 every engine gives the widened GEMM's bits.
#include "../lib/bf16.h"

#include "megatron_rt/cross_entropy.h"
#include "megatron_rt/embedding.h"
#include "megatron_rt/gemm.h"
#include "megatron_rt/layernorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using mrt::narrow;
using mrt::widen;

namespace {

// oneDNN's bf16 matmul needs AVX-512 (its avx512_core). Without it the
// entry points would end the process; the tests then run the widened
// engine, as megatron-run's users may ask with MRT_GEMM_BF16=widened.
bool cpuHasAvx512Core() {
  return __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
}

class Bf16GemmEngine : public ::testing::Environment {
  void SetUp() override {
    if (!cpuHasAvx512Core())
      setenv("MRT_GEMM_BF16", "widened", 0);
  }
};
const auto *const kBf16GemmEngine =
    ::testing::AddGlobalTestEnvironment(new Bf16GemmEngine);

} // namespace

TEST(Bf16, RoundsToNearestTiesToEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: the even neighbour is 1.
  EXPECT_EQ(widen(narrow(1.0f + 0x1p-8f)), 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: even is above.
  EXPECT_EQ(widen(narrow(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_EQ(widen(narrow(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  EXPECT_EQ(widen(narrow(-2.5f)), -2.5f);
}

TEST(Bf16, KeepsInfinitiesAndNaNs) {
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(widen(narrow(inf)), inf);
  EXPECT_EQ(widen(narrow(-inf)), -inf);
  // The largest float rounds up to infinity, as an overflowing cast should.
  EXPECT_EQ(widen(narrow(std::numeric_limits<float>::max())), inf);
  // A NaN whose payload sits in the low half would round to infinity.
  uint32_t bits = 0x7f800001u;
  float nan;
  std::memcpy(&nan, &bits, sizeof(nan));
  EXPECT_TRUE(std::isnan(widen(narrow(nan))));
}

std::vector<mrt_bf16> bf16Values(int64_t n, float scale) {
  std::vector<mrt_bf16> values(n);
  for (int64_t i = 0; i < n; ++i)
    values[i] = narrow(scale * static_cast<float>((i * 7919) % 23 - 11));
  return values;
}

std::vector<float> widened(const std::vector<mrt_bf16> &values) {
  std::vector<float> result;
  for (mrt_bf16 value : values)
    result.push_back(widen(value));
  return result;
}

TEST(Bf16, GemmRoundsTheFp32Product) {
  const int64_t M = 5, N = 6, K = 7;
  auto a = bf16Values(M * K, 0.25f), b = bf16Values(K * N, 0.5f);
  std::vector<float> want(M * N);
  mrt_gemm_f32(0, 0, M, N, K, 1.0f, widened(a).data(), K, widened(b).data(),
               N, 0.0f, want.data(), N);
  std::vector<float> wide(M * N);
  mrt_gemm_bf16_f32(0, 0, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f,
                    wide.data(), N);
  std::vector<mrt_bf16> c(M * N);
  mrt_gemm_bf16(0, 0, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c.data(),
                N);
  for (int64_t i = 0; i < M * N; ++i) {
    EXPECT_EQ(wide[i], want[i]) << i;
    EXPECT_EQ(c[i], narrow(want[i])) << i;
  }
}

TEST(Bf16, GemmBiasRoundsTheFp32Sum) {
  const int64_t M = 3, N = 4, K = 5;
  auto a = bf16Values(M * K, 0.25f), b = bf16Values(K * N, 0.5f),
       bias = bf16Values(N, 0.125f);
  std::vector<float> want(M * N);
  mrt_gemm_bias_f32(0, 0, M, N, K, widened(a).data(), K, widened(b).data(), N,
                    widened(bias).data(), want.data(), N);
  std::vector<mrt_bf16> c(M * N);
  mrt_gemm_bias_bf16(0, 0, M, N, K, a.data(), K, b.data(), N, bias.data(),
                     c.data(), N);
  for (int64_t i = 0; i < M * N; ++i)
    EXPECT_EQ(c[i], narrow(want[i])) << i;
}

// GELU of the unrounded sum, each output rounded once.
TEST(Bf16, GemmBiasGeluRoundsPreAndGeluOnce) {
  const int64_t M = 3, N = 8, K = 5;
  auto a = bf16Values(M * K, 0.25f), b = bf16Values(K * N, 0.5f),
       bias = bf16Values(N, 0.125f);
  std::vector<float> pre(M * N), out(M * N);
  mrt_gemm_bias_gelu_f32(0, 0, M, N, K, widened(a).data(), K,
                         widened(b).data(), N, widened(bias).data(),
                         pre.data(), out.data(), N);
  std::vector<mrt_bf16> pre16(M * N), out16(M * N);
  mrt_gemm_bias_gelu_bf16(0, 0, M, N, K, a.data(), K, b.data(), N,
                          bias.data(), pre16.data(), out16.data(), N);
  for (int64_t i = 0; i < M * N; ++i) {
    EXPECT_EQ(pre16[i], narrow(pre[i])) << i;
    EXPECT_EQ(out16[i], narrow(out[i])) << i;
  }
}

// Every transposition, leading dimensions past the rows' ends, alpha and
// beta, at sizes that leave tails in every kernel's blocking.
TEST(Bf16, GemmMatchesTheWidenedGemmForEveryLayout) {
  const int64_t M = 37, N = 45, K = 53;
  for (int transA : {0, 1})
    for (int transB : {0, 1}) {
      const int64_t lda = (transA ? M : K) + 3, ldb = (transB ? K : N) + 5,
                    ldc = N + 2;
      auto a = bf16Values((transA ? K : M) * lda, 0.25f),
           b = bf16Values((transB ? N : K) * ldb, 0.5f),
           c = bf16Values(M * ldc, 1.0f);
      std::vector<float> wide = widened(c), want = wide;
      mrt_gemm_f32(transA, transB, M, N, K, 2.0f, widened(a).data(), lda,
                   widened(b).data(), ldb, 0.5f, want.data(), ldc);
      mrt_gemm_bf16_f32(transA, transB, M, N, K, 2.0f, a.data(), lda,
                        b.data(), ldb, 0.5f, wide.data(), ldc);
      mrt_gemm_bf16(transA, transB, M, N, K, 2.0f, a.data(), lda, b.data(),
                    ldb, 0.5f, c.data(), ldc);
      for (int64_t r = 0; r < M; ++r)
        for (int64_t col = 0; col < ldc; ++col) {
          const int64_t i = r * ldc + col;
          EXPECT_EQ(wide[i], want[i]) << transA << transB << " " << i;
          EXPECT_EQ(c[i], narrow(want[i])) << transA << transB << " " << i;
        }
    }
}

TEST(Bf16, GemmBiasGeluLeavesThePaddingAndSkipsAMissingPre) {
  const int64_t M = 9, N = 24, K = 40, ldc = N + 8;
  auto a = bf16Values(M * K, 0.25f), b = bf16Values(N * K, 0.5f),
       bias = bf16Values(N, 0.125f);
  std::vector<float> pre(M * ldc), out(M * ldc);
  mrt_gemm_bias_gelu_f32(0, 1, M, N, K, widened(a).data(), K,
                         widened(b).data(), K, widened(bias).data(),
                         pre.data(), out.data(), ldc);
  std::vector<mrt_bf16> out16(M * ldc, narrow(42.0f));
  mrt_gemm_bias_gelu_bf16(0, 1, M, N, K, a.data(), K, b.data(), K,
                          bias.data(), nullptr, out16.data(), ldc);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t col = 0; col < ldc; ++col)
      EXPECT_EQ(out16[r * ldc + col],
                col < N ? narrow(out[r * ldc + col]) : narrow(42.0f))
          << r << "," << col;
}

TEST(Bf16, GemmEnginesNameWhatRunsTheBf16Gemms) {
  const std::string engines = mrt_gemm_engines();
  const char *forced = std::getenv("MRT_GEMM_BF16");
  if (!forced || std::string(forced) == "onednn")
    EXPECT_NE(engines.find("bf16: oneDNN matmul "), std::string::npos)
        << engines;
  else
    EXPECT_NE(engines.find("bf16: fp32 GEMMs on widened operands"),
              std::string::npos)
        << engines;
  EXPECT_EQ(mrt_gemm_error(1), nullptr);
}

TEST(Bf16, GemmLeavesThePaddingPastN) {
  auto a = bf16Values(4, 1.0f), b = bf16Values(4, 1.0f);
  std::vector<mrt_bf16> c(2 * 3, narrow(42.0f));
  mrt_gemm_bf16(0, 0, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(),
                3);
  EXPECT_EQ(c[2], narrow(42.0f));
  EXPECT_EQ(c[5], narrow(42.0f));
}

TEST(Bf16, GemmWithBetaReadsTheBf16Output) {
  auto a = bf16Values(4, 1.0f), b = bf16Values(4, 1.0f);
  std::vector<mrt_bf16> c = bf16Values(4, 2.0f);
  std::vector<float> want = widened(c);
  mrt_gemm_f32(0, 0, 2, 2, 2, 1.0f, widened(a).data(), 2, widened(b).data(), 2,
               1.0f, want.data(), 2);
  mrt_gemm_bf16(0, 0, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 1.0f, c.data(),
                2);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(c[i], narrow(want[i])) << i;
}

TEST(Bf16, LayerNormGradientsOfParametersStayFp32) {
  const int64_t rows = 3, cols = 8;
  auto x = bf16Values(rows * cols, 0.3f), dy = bf16Values(rows * cols, 0.1f);
  auto w = bf16Values(cols, 0.7f);
  std::vector<float> mean(rows), rstd(rows), dwWant(cols), dbWant(cols),
      dxWant(rows * cols);
  mrt_layernorm_stats_bf16(x.data(), mean.data(), rstd.data(), rows, cols,
                           1e-5f);
  mrt_layernorm_bwd_f32(widened(dy).data(), widened(x).data(),
                        widened(w).data(), mean.data(), rstd.data(),
                        dxWant.data(), dwWant.data(), dbWant.data(), rows,
                        cols);
  std::vector<float> dw(cols), db(cols);
  std::vector<mrt_bf16> dx(rows * cols);
  mrt_layernorm_bwd_bf16(dy.data(), x.data(), w.data(), mean.data(),
                         rstd.data(), dx.data(), dw.data(), db.data(), rows,
                         cols);
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_EQ(dw[c], dwWant[c]) << c;
    EXPECT_EQ(db[c], dbWant[c]) << c;
  }
  for (int64_t i = 0; i < rows * cols; ++i)
    EXPECT_EQ(dx[i], narrow(dxWant[i])) << i;
}

TEST(Bf16, EmbeddingBackwardAccumulatesIntoFp32) {
  const int64_t V = 4, C = 3, N = 2;
  std::vector<int32_t> ids = {1, 1};
  std::vector<mrt_bf16> dout = {narrow(1.0f), narrow(2.0f), narrow(3.0f),
                                narrow(0x1p-9f), narrow(0x1p-9f),
                                narrow(0x1p-9f)};
  std::vector<float> dtable(V * C, 1.0f);
  mrt_embedding_bwd_bf16(dout.data(), ids.data(), 0, V, C, N, dtable.data());
  // 2 + 2^-9 needs more than bf16's 8 significant bits.
  EXPECT_EQ(dtable[1 * C + 0], 2.0f + 0x1p-9f);
  EXPECT_EQ(dtable[0], 1.0f);
}

// The bf16 cross-entropy reads the logits as stored: the f32 kernels'
// numbers on the widened logits, the gradient rounded once.
TEST(Bf16, CrossEntropyReadsBf16LogitsInPlace) {
  const int64_t N = 3, Vl = 40, start = 8, valid = 44;
  const auto logits = bf16Values(N * Vl, 0.125f);
  const std::vector<float> wide = widened(logits);
  const std::vector<int32_t> targets = {9, 3, 43};
  std::vector<float> max(N), max16(N), sums(N), sums16(N), target(N),
      target16(N), grad(N * Vl);
  mrt_vocab_ce_local_max_f32(wide.data(), N, Vl, start, valid, max.data());
  mrt_vocab_ce_local_max_bf16(logits.data(), N, Vl, start, valid,
                              max16.data());
  mrt_vocab_ce_local_sumexp_f32(wide.data(), targets.data(), N, Vl, start,
                                valid, max.data(), sums.data(), target.data());
  mrt_vocab_ce_local_sumexp_bf16(logits.data(), targets.data(), N, Vl, start,
                                 valid, max.data(), sums16.data(),
                                 target16.data());
  EXPECT_EQ(max16, max);
  EXPECT_EQ(sums16, sums);
  EXPECT_EQ(target16, target);
  std::vector<mrt_bf16> grad16(N * Vl, narrow(42.0f));
  mrt_vocab_ce_bwd_f32(wide.data(), targets.data(), max.data(), sums.data(), N,
                       Vl, start, valid, 0.5f, grad.data());
  mrt_vocab_ce_bwd_bf16(logits.data(), targets.data(), max.data(),
                        sums.data(), N, Vl, start, valid, 0.5f, grad16.data());
  for (int64_t i = 0; i < N * Vl; ++i)
    EXPECT_EQ(grad16[i], narrow(grad[i])) << i;
}

// Gathering rows moves their bits; a row another rank holds is zeros.
TEST(Bf16, EmbeddingForwardCopiesTheStoredRows) {
  const int64_t Vl = 4, C = 3;
  const auto table = bf16Values(Vl * C, 0.375f);
  const std::vector<int32_t> ids = {6, 1, 5};
  std::vector<mrt_bf16> out(ids.size() * C, narrow(42.0f));
  mrt_embedding_fwd_bf16(table.data(), ids.data(), 2, Vl, C, ids.size(),
                         out.data());
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(out[c], narrow(0.0f)) << c;
    EXPECT_EQ(out[C + c], narrow(0.0f)) << c;
    EXPECT_EQ(out[2 * C + c], table[3 * C + c]) << c;
  }
}
