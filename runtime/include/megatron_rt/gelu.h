/* GELU, tanh approximation as in GPT-2:
 * gelu(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))). */
#ifndef MEGATRON_RT_GELU_H
#define MEGATRON_RT_GELU_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* y[i] = gelu(x[i]) for i < n; y may alias x. */
MRT_API void mrt_gelu_fwd_f32(const float *x, float *y, int64_t n);

/* dx[i] = dy[i] * gelu'(x[i]) for i < n (overwrite); dx may alias dy. */
MRT_API void mrt_gelu_bwd_f32(const float *x, const float *dy, float *dx,
                              int64_t n);

/* y[r,c] = gelu(x[r,c] + bias[c]) for x, y [rows,cols], bias [cols]; y may
 * alias x. */
MRT_API void mrt_bias_gelu_fwd_f32(const float *x, const float *bias, float *y,
                                   int64_t rows, int64_t cols);

/* With h = x + bias: dx[r,c] = dy[r,c] * gelu'(h[r,c]) (overwrite) and
 * dbias[c] += sum_r dx[r,c] (ACCUMULATE). dx may alias dy. */
MRT_API void mrt_bias_gelu_bwd_f32(const float *x, const float *bias,
                                   const float *dy, float *dx, float *dbias,
                                   int64_t rows, int64_t cols);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_GELU_H */
