#include "megatron_rt/gemm.h"

#include "fatal.h"

#include <cblas.h>

extern "C" void mrt_gemm_f32(int transA, int transB, int64_t M, int64_t N,
                             int64_t K, float alpha, const float *A,
                             int64_t lda, const float *B, int64_t ldb,
                             float beta, float *C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, mrt::checkedInt(M, "gemm M"),
              mrt::checkedInt(N, "gemm N"), mrt::checkedInt(K, "gemm K"), alpha,
              A, mrt::checkedInt(lda, "gemm lda"), B,
              mrt::checkedInt(ldb, "gemm ldb"), beta, C,
              mrt::checkedInt(ldc, "gemm ldc"));
}
