/* Layer normalisation (torch.nn.LayerNorm) and RMS normalisation (Llama's
 * RMSNorm) over the last dimension. */
#ifndef MEGATRON_RT_LAYERNORM_H
#define MEGATRON_RT_LAYERNORM_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* y[r,:] = (x[r,:] - mean[r]) * rstd[r] * w + b for x, y [rows,cols] and
 * w, b [cols]; rstd = 1/sqrt(biased variance + eps). mean and rstd [rows] are
 * written for the backward pass. y may alias x. */
MRT_API void mrt_layernorm_fwd_f32(const float *x, const float *w,
                                   const float *b, float *y, float *mean,
                                   float *rstd, int64_t rows, int64_t cols,
                                   float eps);

/* The residual connection and the next layer norm in one pass:
 * sum = x + (delta + delta_bias[c]) is written (the residual stream goes
 * on), then y = layernorm(sum) as mrt_layernorm_fwd_f32, with its mean and
 * rstd. All [rows, cols] but the [cols] vectors; sum must not alias y. */
MRT_API void mrt_residual_layernorm_fwd_f32(
    const float *x, const float *delta, const float *delta_bias, float *sum,
    const float *w, const float *b, float *y, float *mean, float *rstd,
    int64_t rows, int64_t cols, float eps);

/* The per-row mean and reciprocal standard deviation mrt_layernorm_fwd_f32
 * saves, alone: the backward pass recomputes them instead of storing them. */
MRT_API void mrt_layernorm_stats_f32(const float *x, float *mean, float *rstd,
                                     int64_t rows, int64_t cols, float eps);

/* Gradients of mrt_layernorm_fwd_f32 given dy [rows,cols] and the saved
 * mean/rstd: dx [rows,cols] and dw, db [cols] are OVERWRITTEN (dw, db with
 * the sum over all rows). dx may alias dy. */
MRT_API void mrt_layernorm_bwd_f32(const float *dy, const float *x,
                                   const float *w, const float *mean,
                                   const float *rstd, float *dx, float *dw,
                                   float *db, int64_t rows, int64_t cols);

/* The same four on bf16 x, w, b, y, sum, delta, delta_bias, dy, dx; mean,
 * rstd, dw and db stay fp32. */
MRT_API void mrt_layernorm_fwd_bf16(const mrt_bf16 *x, const mrt_bf16 *w,
                                    const mrt_bf16 *b, mrt_bf16 *y, float *mean,
                                    float *rstd, int64_t rows, int64_t cols,
                                    float eps);
MRT_API void mrt_residual_layernorm_fwd_bf16(
    const mrt_bf16 *x, const mrt_bf16 *delta, const mrt_bf16 *delta_bias,
    mrt_bf16 *sum, const mrt_bf16 *w, const mrt_bf16 *b, mrt_bf16 *y,
    float *mean, float *rstd, int64_t rows, int64_t cols, float eps);
MRT_API void mrt_layernorm_stats_bf16(const mrt_bf16 *x, float *mean,
                                      float *rstd, int64_t rows, int64_t cols,
                                      float eps);
MRT_API void mrt_layernorm_bwd_bf16(const mrt_bf16 *dy, const mrt_bf16 *x,
                                    const mrt_bf16 *w, const float *mean,
                                    const float *rstd, mrt_bf16 *dx, float *dw,
                                    float *db, int64_t rows, int64_t cols);

/* RMS norm: y[r,:] = x[r,:] * rstd[r] * w with rstd = 1/sqrt(mean(x^2) + eps),
 * as Hugging Face's LlamaRMSNorm; no mean is subtracted and there is no
 * bias. rstd [rows] is written for the backward pass. y may alias x. */
MRT_API void mrt_rmsnorm_fwd_f32(const float *x, const float *w, float *y,
                                 float *rstd, int64_t rows, int64_t cols,
                                 float eps);
/* sum = x + delta is written, then y = rmsnorm(sum) with its rstd; sum must
 * not alias y. */
MRT_API void mrt_residual_rmsnorm_fwd_f32(const float *x, const float *delta,
                                          float *sum, const float *w, float *y,
                                          float *rstd, int64_t rows,
                                          int64_t cols, float eps);
/* The per-row rstd alone, for the backward pass. */
MRT_API void mrt_rmsnorm_stats_f32(const float *x, float *rstd, int64_t rows,
                                   int64_t cols, float eps);
/* Gradients given dy and the saved rstd: dx [rows,cols] and dw [cols] are
 * OVERWRITTEN (dw with the sum over all rows). dx may alias dy. */
MRT_API void mrt_rmsnorm_bwd_f32(const float *dy, const float *x,
                                 const float *w, const float *rstd, float *dx,
                                 float *dw, int64_t rows, int64_t cols);
/* The same four on bf16 x, w, y, sum, delta, dy, dx; rstd and dw stay
 * fp32. */
MRT_API void mrt_rmsnorm_fwd_bf16(const mrt_bf16 *x, const mrt_bf16 *w,
                                  mrt_bf16 *y, float *rstd, int64_t rows,
                                  int64_t cols, float eps);
MRT_API void mrt_residual_rmsnorm_fwd_bf16(const mrt_bf16 *x,
                                           const mrt_bf16 *delta,
                                           mrt_bf16 *sum, const mrt_bf16 *w,
                                           mrt_bf16 *y, float *rstd,
                                           int64_t rows, int64_t cols,
                                           float eps);
MRT_API void mrt_rmsnorm_stats_bf16(const mrt_bf16 *x, float *rstd,
                                    int64_t rows, int64_t cols, float eps);
MRT_API void mrt_rmsnorm_bwd_bf16(const mrt_bf16 *dy, const mrt_bf16 *x,
                                  const mrt_bf16 *w, const float *rstd,
                                  mrt_bf16 *dx, float *dw, int64_t rows,
                                  int64_t cols);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_LAYERNORM_H */
