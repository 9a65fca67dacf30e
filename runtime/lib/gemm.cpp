#include "megatron_rt/gemm.h"

#include "fatal.h"

#include "gelu.h"

#include <dnnl.h>

#include <algorithm>

// oneDNN's sgemm (row-major, as every caller's buffers are): on the step's
// shapes, M = B*T rows against weights of 768..50257 columns, it ran 12 %
// faster than OpenBLAS's, FLOP-weighted (bench/cpu/gemm_ceiling.py), and
// with one row within a few percent of sgemv, so no shape needs another
// library.
extern "C" void mrt_gemm_f32(int transA, int transB, int64_t M, int64_t N,
                             int64_t K, float alpha, const float *A,
                             int64_t lda, const float *B, int64_t ldb,
                             float beta, float *C, int64_t ldc) {
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
