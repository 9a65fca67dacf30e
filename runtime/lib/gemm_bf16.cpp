// The bf16 GEMMs (megatron_rt/gemm.h), on one of two engines chosen once
// per process:
// - oneDNN: its bf16 matmul, bf16 operands multiplied exactly and summed in
//   fp32, C rounded once, on AMX tiles or AVX-512-BF16 dot products where
//   the CPU has them (the GPU's cuBLASLt computes the same sums);
// - widened: fp32 GEMMs on fp32 copies of the operands, rounded as above:
//   the same rounding points at the fp32 rate, for CPUs where oneDNN has no
//   bf16 matmul, only when MRT_GEMM_BF16=widened asks for it, so that a
//   bf16 step never runs at fp32 speed without its user knowing.
// The two differ only in the order of each dot product's fp32 sums.
#include "bf16.h"
#include "fatal.h"
#include "gelu.h"
#include "gemm_library.h"
#include "isa.h"
#include "onednn_matmul.h"

#include "megatron_rt/gemm.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

using mrt::Narrowed;
using mrt::Widened;

namespace {

enum class Bf16Engine { OneDNN, Widened };

struct Bf16Choice {
  Bf16Engine engine = Bf16Engine::Widened;
  std::string error; // why no bf16 GEMM can run ("": they can)
};

Bf16Choice chooseBf16Engine() {
  const mrt::Bf16MatmulSupport &support = mrt::bf16MatmulSupport();
  const char *forced = std::getenv("MRT_GEMM_BF16");
  if (forced && std::strcmp(forced, "widened") == 0)
    return {Bf16Engine::Widened, ""};
  if (forced && std::strcmp(forced, "onednn") != 0)
    return {Bf16Engine::Widened, std::string("MRT_GEMM_BF16=") + forced +
                                     ": expected onednn or widened"};
  if (!support.available())
    return {Bf16Engine::OneDNN,
            support.reason +
                "; MRT_GEMM_BF16=widened runs them as fp32 GEMMs on widened "
                "operands (the same rounding points, at the fp32 rate)"};
  return {Bf16Engine::OneDNN, ""};
}

const Bf16Choice &bf16Choice() {
  static const Bf16Choice choice = chooseBf16Engine();
  return choice;
}

/// The engine of a bf16 GEMM about to run.
Bf16Engine bf16Engine() {
  const Bf16Choice &choice = bf16Choice();
  if (!choice.error.empty())
    mrt::fatal("a bf16 GEMM, but %s", choice.error.c_str());
  return choice.engine;
}

std::string describeBf16Engine() {
  const Bf16Choice &choice = bf16Choice();
  if (!choice.error.empty())
    return "none (" + choice.error + ")";
  if (choice.engine == Bf16Engine::Widened)
    return "fp32 GEMMs on widened operands (MRT_GEMM_BF16)";
  const mrt::Bf16MatmulSupport &support = mrt::bf16MatmulSupport();
  const char *units = support.matrixUnits() ? "AMX-BF16 matrix units"
                      : support.nativeBf16()
                          ? "AVX-512-BF16 dot products, no matrix units"
                          : "converted to fp32 by oneDNN: no bf16 instructions";
  return "oneDNN matmul " + support.kernel + " (" + units + ")";
}

/// Elements a [rows, cols] matrix with leading dimension ld spans, as BLAS
/// sizes it: the last row ends at its last column.
int64_t spanned(int64_t rows, int64_t cols, int64_t ld) {
  return rows == 0 ? 0 : (rows - 1) * ld + cols;
}

/// Elements of an op(X) operand, [rows, cols] as op(X) sees it.
int64_t storedElements(int trans, int64_t rows, int64_t cols, int64_t ld) {
  return trans ? spanned(cols, rows, ld) : spanned(rows, cols, ld);
}

/// C's starting values when the GEMM reads C (beta != 0) or must leave the
/// padding past N as it was: the rounding back writes all C spans.
const mrt_bf16 *initialC(const mrt_bf16 *C, int64_t N, int64_t ldc,
                         bool readsC) {
  return readsC || ldc != N ? C : nullptr;
}

mrt::MatmulProblem problem(int transA, int transB, int64_t M, int64_t N,
                           int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
                           mrt::GemmType result) {
  mrt::MatmulProblem p;
  p.transA = transA;
  p.transB = transB;
  p.M = M;
  p.N = N;
  p.K = K;
  p.lda = lda;
  p.ldb = ldb;
  p.ldc = ldc;
  p.result = result;
  return p;
}

/// C = alpha op(A) op(B) + beta C on oneDNN's bf16 matmul, C of `result`'s
/// type.
void oneDNNGemm(mrt::GemmType result, int transA, int transB, int64_t M,
                int64_t N, int64_t K, float alpha, const mrt_bf16 *A,
                int64_t lda, const mrt_bf16 *B, int64_t ldb, float beta,
                void *C, int64_t ldc) {
  mrt::MatmulProblem p =
      problem(transA, transB, M, N, K, lda, ldb, ldc, result);
  p.alpha = alpha;
  p.beta = beta;
  mrt::oneDNNMatmul(p, A, B, nullptr, C);
}

/// pre = sum and out = gelu(sum), both rounded from the fp32 sum (compact
/// [M, N]) into rows of leading dimension ldc; pre may be NULL.
MRT_VECTOR_KERNEL void roundSumAndGelu(const float *sum, mrt_bf16 *pre,
                                       mrt_bf16 *out, int64_t M, int64_t N,
                                       int64_t ldc) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
    const float *s = sum + r * N;
    mrt_bf16 *o = out + r * ldc;
#pragma omp simd
    for (int64_t c = 0; c < N; ++c)
      o[c] = mrt::narrow(mrt::geluOf(s[c]));
    if (!pre)
      continue;
    mrt_bf16 *p = pre + r * ldc;
#pragma omp simd
    for (int64_t c = 0; c < N; ++c)
      p[c] = mrt::narrow(s[c]);
  }
}

} // namespace

extern "C" const char *mrt_gemm_engines(void) {
  static const std::string text = std::string("fp32: ") +
                                  mrt::fp32GemmLibrary() +
                                  "; bf16: " + describeBf16Engine();
  return text.c_str();
}

extern "C" const char *mrt_gemm_error(int bf16) {
  if (!mrt::fp32GemmError().empty())
    return mrt::fp32GemmError().c_str();
  if (bf16 && !bf16Choice().error.empty())
    return bf16Choice().error.c_str();
  return nullptr;
}

extern "C" void mrt_gemm_bf16_f32(int transA, int transB, int64_t M, int64_t N,
                                  int64_t K, float alpha, const mrt_bf16 *A,
                                  int64_t lda, const mrt_bf16 *B, int64_t ldb,
                                  float beta, float *C, int64_t ldc) {
  if (bf16Engine() == Bf16Engine::OneDNN)
    return oneDNNGemm(mrt::GemmType::F32, transA, transB, M, N, K, alpha, A,
                      lda, B, ldb, beta, C, ldc);
  Widened a(A, storedElements(transA, M, K, lda)),
      b(B, storedElements(transB, K, N, ldb));
  mrt_gemm_f32(transA, transB, M, N, K, alpha, a.data(), lda, b.data(), ldb,
               beta, C, ldc);
}

extern "C" void mrt_gemm_bf16(int transA, int transB, int64_t M, int64_t N,
                              int64_t K, float alpha, const mrt_bf16 *A,
                              int64_t lda, const mrt_bf16 *B, int64_t ldb,
                              float beta, mrt_bf16 *C, int64_t ldc) {
  if (bf16Engine() == Bf16Engine::OneDNN)
    return oneDNNGemm(mrt::GemmType::BF16, transA, transB, M, N, K, alpha, A,
                      lda, B, ldb, beta, C, ldc);
  Narrowed c(C, spanned(M, N, ldc), initialC(C, N, ldc, beta != 0.0f));
  mrt_gemm_bf16_f32(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta,
                    c.data(), ldc);
}

extern "C" void mrt_gemm_bias_bf16(int transA, int transB, int64_t M,
                                   int64_t N, int64_t K, const mrt_bf16 *A,
                                   int64_t lda, const mrt_bf16 *B, int64_t ldb,
                                   const mrt_bf16 *bias, mrt_bf16 *C,
                                   int64_t ldc) {
  if (bf16Engine() == Bf16Engine::OneDNN) {
    mrt::MatmulProblem p =
        problem(transA, transB, M, N, K, lda, ldb, ldc, mrt::GemmType::BF16);
    p.bias = true;
    return mrt::oneDNNMatmul(p, A, B, bias, C);
  }
  Widened a(A, storedElements(transA, M, K, lda)),
      b(B, storedElements(transB, K, N, ldb)), biases(bias, N);
  Narrowed c(C, spanned(M, N, ldc), initialC(C, N, ldc, false));
  mrt_gemm_bias_f32(transA, transB, M, N, K, a.data(), lda, b.data(), ldb,
                    biases.data(), c.data(), ldc);
}

extern "C" void mrt_gemm_bias_gelu_bf16(int transA, int transB, int64_t M,
                                        int64_t N, int64_t K,
                                        const mrt_bf16 *A, int64_t lda,
                                        const mrt_bf16 *B, int64_t ldb,
                                        const mrt_bf16 *bias, mrt_bf16 *pre,
                                        mrt_bf16 *out, int64_t ldc) {
  // GELU is of the unrounded sum: the GEMM writes fp32, one pass rounds both
  // outputs from it.
  mrt::Scratch<float> sum(M * N);
  if (bf16Engine() == Bf16Engine::OneDNN) {
    mrt::MatmulProblem p =
        problem(transA, transB, M, N, K, lda, ldb, N, mrt::GemmType::F32);
    p.bias = true;
    mrt::oneDNNMatmul(p, A, B, bias, sum.data());
  } else {
    Widened a(A, storedElements(transA, M, K, lda)),
        b(B, storedElements(transB, K, N, ldb)), biases(bias, N);
    mrt_gemm_bias_f32(transA, transB, M, N, K, a.data(), lda, b.data(), ldb,
                      biases.data(), sum.data(), N);
  }
  roundSumAndGelu(sum.data(), pre, out, M, N, ldc);
}
