/* The pieces of global-norm gradient clipping (AdamW itself is generated
 * code: one elementwise kernel per parameter). */
#ifndef MEGATRON_RT_OPTIMIZER_H
#define MEGATRON_RT_OPTIMIZER_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* sums[slot] = sum_i x[i]^2, accumulated in double. A global norm gives
 * each gradient a slot of one buffer (device memory on a GPU) and reads
 * them all back with one mrt_sum_f64: one synchronisation, not one per
 * gradient. */
MRT_API void mrt_sum_squares_f32(const float *x, int64_t n, double *sums,
                                 int64_t slot);

/* values[0] + ... + values[n-1] in index order, on the host (the same
 * total on every run and every runtime). */
MRT_API double mrt_sum_f64(const double *values, int64_t n);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_OPTIMIZER_H */
