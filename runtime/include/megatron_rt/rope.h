/* Rotary position embeddings (Hugging Face's rotate_half convention). */
#ifndef MEGATRON_RT_ROPE_H
#define MEGATRON_RT_ROPE_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* x, y [B,T,H*D], D even: token t of sequence b is at position
 * p = positions[b] + t. In each head, element i < D/2 and element i + D/2
 * rotate by the angle direction * p * theta^(-2i/D) (angles in double):
 *   y_i = x_i cos - x_{i+D/2} sin,  y_{i+D/2} = x_{i+D/2} cos + x_i sin.
 * direction is 1 (the embedding) or -1 (its inverse, the gradient). y may
 * alias x. */
MRT_API void mrt_rope_f32(const float *x, const int32_t *positions, float *y,
                          int64_t B, int64_t T, int64_t H, int64_t D,
                          double theta, int64_t direction);
MRT_API void mrt_rope_bf16(const mrt_bf16 *x, const int32_t *positions,
                           mrt_bf16 *y, int64_t B, int64_t T, int64_t H,
                           int64_t D, double theta, int64_t direction);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_ROPE_H */
