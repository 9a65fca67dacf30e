/* Causal multi-head self-attention on a fused qkv projection. */
#ifndef MEGATRON_RT_ATTENTION_H
#define MEGATRON_RT_ATTENTION_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* qkv [B,T,3*H*D]: columns [0,HD) are q, [HD,2HD) k, [2HD,3HD) v, and head h
 * owns columns [h*D,(h+1)*D) of each section. out [B,T,H*D] (heads
 * concatenated the same way) = softmax(q k^T / sqrt(D), causal) v, where
 * query t sees keys 0..t; lse [B,H,T] receives each score row's
 * log-sum-exp (of the scaled scores). */
MRT_API void mrt_attention_fwd_f32(const float *qkv, float *out, float *lse,
                                   int64_t B, int64_t T, int64_t H, int64_t D);

/* Backward of mrt_attention_fwd_f32 given its out and lse and dout [B,T,HD]:
 * dqkv [B,T,3HD] is OVERWRITTEN in the qkv layout. Probabilities are
 * recomputed from q, k and lse one small tile (16 x 64) at a time. */
MRT_API void mrt_attention_bwd_f32(const float *qkv, const float *out,
                                   const float *dout, const float *lse,
                                   float *dqkv, int64_t B, int64_t T, int64_t H,
                                   int64_t D);

/* The same two on bf16 qkv, out, dout and dqkv; lse stays fp32. */
MRT_API void mrt_attention_fwd_bf16(const mrt_bf16 *qkv, mrt_bf16 *out,
                                    float *lse, int64_t B, int64_t T, int64_t H,
                                    int64_t D);
MRT_API void mrt_attention_bwd_bf16(const mrt_bf16 *qkv, const mrt_bf16 *out,
                                    const mrt_bf16 *dout, const float *lse,
                                    mrt_bf16 *dqkv, int64_t B, int64_t T,
                                    int64_t H, int64_t D);

/* Generation. qkv [B,T,3HD] (the layout above) holds T new tokens of each
 * sequence, token t of sequence b at position positions[b] + t; a cache is
 * [L,B,H,N,D]. A position outside [0, N) ends the process (mrt fatal).
 *
 * mrt_kv_cache_store_f32 writes section `section` (1: keys, 2: values) of
 * the chunk into layer `layer` of `cache` at those positions. */
MRT_API void mrt_kv_cache_store_f32(const float *qkv, float *cache,
                                    const int32_t *positions, int64_t section,
                                    int64_t layer, int64_t L, int64_t B,
                                    int64_t T, int64_t H, int64_t D,
                                    int64_t N);

/* out [B,T,HD] = softmax(q k^T / sqrt(D)) v for the chunk's queries over
 * layer `layer` of the caches at positions 0..each query's own. */
MRT_API void mrt_attention_cached_f32(const float *qkv, const float *k_cache,
                                      const float *v_cache,
                                      const int32_t *positions, float *out,
                                      int64_t layer, int64_t L, int64_t B,
                                      int64_t T, int64_t H, int64_t D,
                                      int64_t N);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_ATTENTION_H */
