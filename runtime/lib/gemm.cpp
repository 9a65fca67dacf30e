#include "megatron_rt/gemm.h"

#include "fatal.h"
#include "gelu.h"
#include "gemm_library.h"

#include <cblas.h>
#include <dnnl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// Two BLAS, chosen by the CPU, because neither wins everywhere. On the
// step's shapes (M = B*T rows against weights of 768..50257 columns)
// oneDNN's AVX-512 kernels ran 9 % faster than OpenBLAS's, FLOP-weighted,
// while with both capped at AVX2 on the same machine oneDNN ran 5 % slower,
// the MLP's and the LM head's forward GEMMs 23-30 % slower
// (bench/cpu/gemm_ceiling.py, docs/PERFORMANCE.md).
enum class GemmLibrary { OneDNN, OpenBLAS };

struct GemmChoice {
  GemmLibrary library = GemmLibrary::OpenBLAS;
  std::string error; // why no fp32 GEMM can run ("": they can)
};

// MRT_GEMM=onednn|openblas overrides the choice: A/B runs, and the tests of
// the library the machine would not pick.
GemmChoice chooseGemmLibrary() {
  if (const char *forced = std::getenv("MRT_GEMM")) {
    if (std::strcmp(forced, "onednn") == 0)
      return {GemmLibrary::OneDNN, ""};
    if (std::strcmp(forced, "openblas") == 0)
      return {GemmLibrary::OpenBLAS, ""};
    return {GemmLibrary::OpenBLAS, std::string("MRT_GEMM=") + forced +
                                       ": expected onednn or openblas"};
  }
  return {__builtin_cpu_supports("avx512f") ? GemmLibrary::OneDNN
                                            : GemmLibrary::OpenBLAS,
          ""};
}

const GemmChoice &gemmChoice() {
  static const GemmChoice choice = chooseGemmLibrary();
  return choice;
}

/// The library of a GEMM about to run.
GemmLibrary gemmLibrary() {
  const GemmChoice &choice = gemmChoice();
  if (!choice.error.empty())
    mrt::fatal("%s", choice.error.c_str());
  return choice.library;
}

void oneDNNGemm(int transA, int transB, int64_t M, int64_t N, int64_t K,
                float alpha, const float *A, int64_t lda, const float *B,
                int64_t ldb, float beta, float *C, int64_t ldc) {
  dnnl_status_t status =
      dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', M, N, K, alpha, A,
                 lda, B, ldb, beta, C, ldc);
  if (status != dnnl_success)
    mrt::fatal("mrt_gemm_f32: oneDNN sgemm of [%lld x %lld] x [%lld x %lld] "
               "failed with status %d",
               static_cast<long long>(M), static_cast<long long>(K),
               static_cast<long long>(K), static_cast<long long>(N),
               static_cast<int>(status));
}

// C[1, N] = alpha * A[1, K] op(B) + beta * C: a matrix-vector product
// (decoding one token), which OpenBLAS's sgemm runs as a GEMM with one row,
// slower than sgemv's streaming of B. A's K values are A[k * incA].
void rowTimesMatrix(int transB, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t incA, const float *B, int64_t ldb,
                    float beta, float *C) {
  // op(B) = B [K, N]: y = B^T x; op(B) = B^T, B [N, K]: y = B x.
  const bool t = !transB;
  cblas_sgemv(CblasRowMajor, t ? CblasTrans : CblasNoTrans,
              mrt::checkedInt(t ? K : N, "gemv rows"),
              mrt::checkedInt(t ? N : K, "gemv columns"), alpha, B,
              mrt::checkedInt(ldb, "gemm ldb"), A,
              mrt::checkedInt(incA, "gemv incA"), beta, C, 1);
}

void openBLASGemm(int transA, int transB, int64_t M, int64_t N, int64_t K,
                  float alpha, const float *A, int64_t lda, const float *B,
                  int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M == 1)
    return rowTimesMatrix(transB, N, K, alpha, A, transA ? lda : 1, B, ldb,
                          beta, C);
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, mrt::checkedInt(M, "gemm M"),
              mrt::checkedInt(N, "gemm N"), mrt::checkedInt(K, "gemm K"), alpha,
              A, mrt::checkedInt(lda, "gemm lda"), B,
              mrt::checkedInt(ldb, "gemm ldb"), beta, C,
              mrt::checkedInt(ldc, "gemm ldc"));
}

} // namespace

const char *mrt::fp32GemmLibrary() {
  return gemmChoice().library == GemmLibrary::OneDNN ? "oneDNN sgemm"
                                                     : "OpenBLAS sgemm";
}

const std::string &mrt::fp32GemmError() { return gemmChoice().error; }

extern "C" void mrt_gemm_f32(int transA, int transB, int64_t M, int64_t N,
                             int64_t K, float alpha, const float *A,
                             int64_t lda, const float *B, int64_t ldb,
                             float beta, float *C, int64_t ldc) {
  if (gemmLibrary() == GemmLibrary::OneDNN)
    return oneDNNGemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C,
                      ldc);
  openBLASGemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// The bias is C's starting value: one pass, as sgemm adds into C anyway.
extern "C" void mrt_gemm_bias_f32(int transA, int transB, int64_t M, int64_t N,
                                  int64_t K, const float *A, int64_t lda,
                                  const float *B, int64_t ldb,
                                  const float *bias, float *C, int64_t ldc) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r)
    std::copy(bias, bias + N, C + r * ldc);
  mrt_gemm_f32(transA, transB, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, ldc);
}

// Without pre, the sum goes where GELU then writes its result in place.
extern "C" void mrt_gemm_bias_gelu_f32(int transA, int transB, int64_t M,
                                       int64_t N, int64_t K, const float *A,
                                       int64_t lda, const float *B,
                                       int64_t ldb, const float *bias,
                                       float *pre, float *out, int64_t ldc) {
  float *sum = pre ? pre : out;
  mrt_gemm_bias_f32(transA, transB, M, N, K, A, lda, B, ldb, bias, sum, ldc);
  if (ldc == N)
    return mrt::gelu(sum, out, M * N);
  for (int64_t r = 0; r < M; ++r)
    mrt::gelu(sum + r * ldc, out + r * ldc, N);
}
