/* Causal self-attention: multi-head or grouped-query, on fused or separate
 * q, k and v. */
#ifndef MEGATRON_RT_ATTENTION_H
#define MEGATRON_RT_ATTENTION_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* Grouped-query causal attention. q holds H query heads of width D per
 * token, k and v KV heads each (KV divides H; KV = H is multi-head
 * attention): head h of row (b, t) is q[(b*T + t)*ldq + h*D + d], and key
 * and value head g likewise at row stride ldkv. q, k and v may be tensors
 * of their own (ldq = H*D, ldkv = KV*D) or the sections of one fused
 * [B,T,3HD] projection (k = q + HD, v = q + 2HD, ldq = ldkv = 3HD). Query
 * head h attends to key/value head h / (H/KV). out [B,T,H*D] (heads
 * concatenated) = softmax(q k^T / sqrt(D), causal) v, where query t sees
 * keys 0..t; lse [B,H,T] receives each score row's log-sum-exp (of the
 * scaled scores).
 *
 * With dropout > 0 (in [0, 1)) the probabilities are dropped after the
 * softmax as megatron_rt/dropout.h drops a tensor, with its seed, step and
 * stream: probability (t, j) of head h of sequence b is element (b +
 * batch_offset, h + head_offset, t, j) of global probabilities [*,
 * global_heads, T, T] (the rank's sequences and heads start at those
 * offsets). lse stays that of all probabilities. */
MRT_API void mrt_attention_fwd_f32(const float *q, const float *k,
                                   const float *v, int64_t ldq, int64_t ldkv,
                                   float *out, float *lse, int64_t B,
                                   int64_t T, int64_t H, int64_t KV,
                                   int64_t D, float dropout, int64_t seed,
                                   int64_t step, int64_t stream,
                                   int64_t batch_offset, int64_t head_offset,
                                   int64_t global_heads);
/* Backward of mrt_attention_fwd_f32 given its out and lse and dout [B,T,HD]:
 * dq, dk and dv, laid out as q, k and v (the same strides; sections of one
 * fused gradient when the inputs were), are OVERWRITTEN; a key/value head's
 * gradient sums its query heads'. Probabilities, and their dropout mask
 * (the forward's arguments), are recomputed from q, k and lse one small tile
 * (16 x 64) at a time. */
MRT_API void mrt_attention_bwd_f32(const float *q, const float *k,
                                   const float *v, int64_t ldq, int64_t ldkv,
                                   const float *out, const float *dout,
                                   const float *lse, float *dq, float *dk,
                                   float *dv, int64_t B, int64_t T, int64_t H,
                                   int64_t KV, int64_t D, float dropout,
                                   int64_t seed, int64_t step, int64_t stream,
                                   int64_t batch_offset, int64_t head_offset,
                                   int64_t global_heads);
/* The same two on bf16 q, k, v, out, dout, dq, dk, dv; lse stays fp32. */
MRT_API void mrt_attention_fwd_bf16(const mrt_bf16 *q, const mrt_bf16 *k,
                                    const mrt_bf16 *v, int64_t ldq,
                                    int64_t ldkv, mrt_bf16 *out, float *lse,
                                    int64_t B, int64_t T, int64_t H,
                                    int64_t KV, int64_t D, float dropout,
                                    int64_t seed, int64_t step,
                                    int64_t stream, int64_t batch_offset,
                                    int64_t head_offset,
                                    int64_t global_heads);
MRT_API void mrt_attention_bwd_bf16(const mrt_bf16 *q, const mrt_bf16 *k,
                                    const mrt_bf16 *v, int64_t ldq,
                                    int64_t ldkv, const mrt_bf16 *out,
                                    const mrt_bf16 *dout, const float *lse,
                                    mrt_bf16 *dq, mrt_bf16 *dk, mrt_bf16 *dv,
                                    int64_t B, int64_t T, int64_t H,
                                    int64_t KV, int64_t D, float dropout,
                                    int64_t seed, int64_t step,
                                    int64_t stream, int64_t batch_offset,
                                    int64_t head_offset,
                                    int64_t global_heads);
/* Generation. A cache is [L,B,KV,N,D]: the keys (or values) of every layer,
 * sequence, key/value head and position. A chunk holds T new tokens of each
 * sequence, token t of sequence b at position positions[b] + t. A position
 * outside [0, N) ends the process (mrt fatal).
 *
 * mrt_kv_cache_store_f32 writes the chunk's keys (or values) x, head g of
 * row (b, t) at x[(b*T + t)*ld + g*D], into layer `layer` of `cache` at
 * those positions. */
MRT_API void mrt_kv_cache_store_f32(const float *x, int64_t ld, float *cache,
                                    const int32_t *positions, int64_t layer,
                                    int64_t L, int64_t B, int64_t T,
                                    int64_t KV, int64_t D, int64_t N);
/* out [B,T,HD] = softmax(q k^T / sqrt(D)) v for the chunk's queries (H
 * heads at row stride ldq, as above) over layer `layer` of the caches at
 * positions 0..each query's own, query head h reading cache head
 * h / (H/KV). */
MRT_API void mrt_attention_cached_f32(const float *q, int64_t ldq,
                                      const float *k_cache,
                                      const float *v_cache,
                                      const int32_t *positions, float *out,
                                      int64_t layer, int64_t L, int64_t B,
                                      int64_t T, int64_t H, int64_t KV,
                                      int64_t D, int64_t N);
MRT_EXTERN_C_END

#endif /* MEGATRON_RT_ATTENTION_H */
