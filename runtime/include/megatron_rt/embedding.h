/* Token (vocabulary-parallel) and position embeddings. */
#ifndef MEGATRON_RT_EMBEDDING_H
#define MEGATRON_RT_EMBEDDING_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* This rank holds table [Vl,C] = rows [vocab_start, vocab_start+Vl) of the
 * vocabulary. out[i,:] (out [N,C], overwrite) = table[ids[i]-vocab_start,:]
 * when the id is in that range, else zeros (an all-reduce adds the others). */
MRT_API void mrt_embedding_fwd_f32(const float *table, const int32_t *ids,
                                   int64_t vocab_start, int64_t Vl, int64_t C,
                                   int64_t N, float *out);

/* dtable[ids[i]-vocab_start,:] += dout[i,:] (dout [N,C]) for the ids in this
 * rank's range; ACCUMULATES into dtable [Vl,C] (a tied LM head adds too). */
MRT_API void mrt_embedding_bwd_f32(const float *dout, const int32_t *ids,
                                   int64_t vocab_start, int64_t Vl, int64_t C,
                                   int64_t N, float *dtable);

/* mrt_embedding_fwd_f32 from a bf16 table into bf16 out, and its backward
 * from bf16 dout, ACCUMULATING into the fp32 gradient dtable. */
MRT_API void mrt_embedding_fwd_bf16(const mrt_bf16 *table, const int32_t *ids,
                                    int64_t vocab_start, int64_t Vl, int64_t C,
                                    int64_t N, mrt_bf16 *out);
MRT_API void mrt_embedding_bwd_bf16(const mrt_bf16 *dout, const int32_t *ids,
                                    int64_t vocab_start, int64_t Vl, int64_t C,
                                    int64_t N, float *dtable);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_EMBEDDING_H */
