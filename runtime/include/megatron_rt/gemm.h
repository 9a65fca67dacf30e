/* General matrix multiply: oneDNN's or OpenBLAS's sgemm on the CPU (by the
 * CPU's instruction set; MRT_GEMM=onednn|openblas overrides), cuBLASLt on
 * the GPU. */
#ifndef MEGATRON_RT_GEMM_H
#define MEGATRON_RT_GEMM_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, all row-major with
 * leading dimensions lda/ldb/ldc; op(X) = X^T when transX != 0. As in BLAS,
 * A is stored [M,lda] (or [K,lda] when transposed), and beta == 0 ignores C's
 * previous contents. Every size and leading dimension must fit in an int. */
MRT_API void mrt_gemm_f32(int transA, int transB, int64_t M, int64_t N,
                          int64_t K, float alpha, const float *A, int64_t lda,
                          const float *B, int64_t ldb, float beta, float *C,
                          int64_t ldc);

/* C = op(A) op(B) + bias, the [N] bias added to every row (alpha 1, beta
 * 0): on the GPU the GEMM's own epilogue (cuBLASLt), so no kernel reads C
 * back to add it. The bf16 variant takes a bf16 bias. */
MRT_API void mrt_gemm_bias_f32(int transA, int transB, int64_t M, int64_t N,
                               int64_t K, const float *A, int64_t lda,
                               const float *B, int64_t ldb, const float *bias,
                               float *C, int64_t ldc);
MRT_API void mrt_gemm_bias_bf16(int transA, int transB, int64_t M, int64_t N,
                                int64_t K, const mrt_bf16 *A, int64_t lda,
                                const mrt_bf16 *B, int64_t ldb,
                                const mrt_bf16 *bias, mrt_bf16 *C,
                                int64_t ldc);

/* The MLP's first GEMM with GELU in its epilogue: pre = op(A) op(B) + bias
 * (the [N] bias on every row) and out = gelu(pre) (gelu.h's tanh form, of
 * the unrounded sum), both [M, N] with leading dimension ldc. pre may be
 * NULL when nothing reads it (inference). On the GPU cuBLASLt's
 * GELU_AUX_BIAS epilogue (GELU_BIAS without pre): ldc must be a multiple
 * of 8. */
MRT_API void mrt_gemm_bias_gelu_f32(int transA, int transB, int64_t M,
                                    int64_t N, int64_t K, const float *A,
                                    int64_t lda, const float *B, int64_t ldb,
                                    const float *bias, float *pre, float *out,
                                    int64_t ldc);
MRT_API void mrt_gemm_bias_gelu_bf16(int transA, int transB, int64_t M,
                                     int64_t N, int64_t K, const mrt_bf16 *A,
                                     int64_t lda, const mrt_bf16 *B,
                                     int64_t ldb, const mrt_bf16 *bias,
                                     mrt_bf16 *pre, mrt_bf16 *out,
                                     int64_t ldc);

/* mrt_gemm_f32 on bf16 A and B with fp32 accumulation: C is bf16 here and
 * fp32 in mrt_gemm_bf16_f32 (the parameter gradients). On the CPU oneDNN's
 * bf16 matmul (AMX or AVX-512-BF16 where the CPU has them), or fp32 GEMMs
 * on widened copies where MRT_GEMM_BF16=widened asks (mrt_gemm_engines). */
MRT_API void mrt_gemm_bf16(int transA, int transB, int64_t M, int64_t N,
                           int64_t K, float alpha, const mrt_bf16 *A,
                           int64_t lda, const mrt_bf16 *B, int64_t ldb,
                           float beta, mrt_bf16 *C, int64_t ldc);
MRT_API void mrt_gemm_bf16_f32(int transA, int transB, int64_t M, int64_t N,
                               int64_t K, float alpha, const mrt_bf16 *A,
                               int64_t lda, const mrt_bf16 *B, int64_t ldb,
                               float beta, float *C, int64_t ldc);

/* The GEMM engines of this process, in one line: the fp32 library, and what
 * runs the bf16 GEMMs (oneDNN's matmul kernel and whether it uses the CPU's
 * bf16 matrix units or dot products). Chosen once, at the first call, from
 * the CPU and the environment: MRT_GEMM=onednn|openblas (fp32),
 * MRT_GEMM_BF16=onednn|widened (bf16), and oneDNN's ONEDNN_MAX_CPU_ISA. */
MRT_API const char *mrt_gemm_engines(void);

/* NULL when this process's GEMMs can run: the fp32 ones, and the bf16 ones
 * too when bf16 != 0. Else why not (a bad MRT_GEMM or MRT_GEMM_BF16, the
 * instruction set oneDNN lacks for bf16), the words the first such GEMM
 * would end the process with: a launcher refuses a step with them at
 * start. */
MRT_API const char *mrt_gemm_error(int bf16);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_GEMM_H */
