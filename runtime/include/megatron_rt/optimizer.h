/* AdamW and the pieces of global-norm gradient clipping. */
#ifndef MEGATRON_RT_OPTIMIZER_H
#define MEGATRON_RT_OPTIMIZER_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* One torch.optim.AdamW step (t = step >= 1) on p, g, m, v [n], in PyTorch's
 * order: p *= 1 - lr*wd; m = lerp(m, g, 1-beta1); v = beta2*v + (1-beta2)*g*g;
 * p -= lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps).
 * Scalars are double, as PyTorch's Python floats are. */
MRT_API void mrt_adamw_f32(float *p, const float *g, float *m, float *v,
                           int64_t n, double lr, double beta1, double beta2,
                           double eps, double weight_decay, int64_t step);

/* sums[slot] = sum_i x[i]^2, accumulated in double. A global norm gives
 * each gradient a slot of one buffer (device memory on a GPU) and reads
 * them all back with one mrt_sum_f64: one synchronisation, not one per
 * gradient. */
MRT_API void mrt_sum_squares_f32(const float *x, int64_t n, double *sums,
                                 int64_t slot);

/* values[0] + ... + values[n-1] in index order, on the host (the same
 * total on every run and every runtime). */
MRT_API double mrt_sum_f64(const double *values, int64_t n);

/* x[i] *= s for i < n. */
MRT_API void mrt_scale_f32(float *x, int64_t n, float s);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_OPTIMIZER_H */
