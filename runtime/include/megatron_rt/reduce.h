/* Reductions the generated code calls. */
#ifndef MEGATRON_RT_REDUCE_H
#define MEGATRON_RT_REDUCE_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* out[c] = sum over r of x[r, c] for x [rows, cols] (OVERWRITE), accumulated
 * in double: the bias gradients, whose rows are every token of the batch. */
MRT_API void mrt_sum_rows_f32(const float *x, int64_t rows, int64_t cols,
                              float *out);

/* The same sums of a bf16 x, into fp32 out. */
MRT_API void mrt_sum_rows_bf16(const mrt_bf16 *x, int64_t rows, int64_t cols,
                               float *out);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_REDUCE_H */
