/* Vocabulary-parallel softmax cross-entropy (Megatron-LM's recipe): each rank
 * holds logits [N,Vl] for the global vocabulary columns
 * [vocab_start, vocab_start+Vl); columns with a global index >= valid_vocab
 * are padding that never enters the softmax. The caller runs, per step:
 *   local_max -> all-reduce(max) -> local_sumexp -> all-reduce(sum) of sumexp
 *   and tlogit -> loss, then bwd; the logits are never gathered.
 * targets [N] are global ids in [0, valid_vocab). */
#ifndef MEGATRON_RT_CROSS_ENTROPY_H
#define MEGATRON_RT_CROSS_ENTROPY_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* max[i] = max over this rank's real columns of logits[i,:]; -INFINITY when
 * the rank holds no real column. */
MRT_API void mrt_vocab_ce_local_max_f32(const float *logits, int64_t N,
                                        int64_t Vl, int64_t vocab_start,
                                        int64_t valid_vocab, float *max);

/* Given the global row max gmax [N]: sumexp[i] = sum over real local columns
 * of exp(logits[i,j] - gmax[i]); tlogit[i] = logits[i, targets[i]-vocab_start]
 * when the target is one of this rank's columns, else 0. */
MRT_API void mrt_vocab_ce_local_sumexp_f32(const float *logits,
                                           const int32_t *targets, int64_t N,
                                           int64_t Vl, int64_t vocab_start,
                                           int64_t valid_vocab,
                                           const float *gmax, float *sumexp,
                                           float *tlogit);

/* Mean over rows of log(sumexp) + gmax - tlogit, from the all-reduced sumexp
 * and tlogit (double accumulation). */
MRT_API float mrt_vocab_ce_loss_f32(const float *gmax, const float *sumexp,
                                    const float *tlogit, int64_t N);

/* dlogits [N,Vl] (OVERWRITE; may alias logits) =
 * (softmax - onehot(target)) * dloss / N on real columns, 0 on padding. */
MRT_API void mrt_vocab_ce_bwd_f32(const float *logits, const int32_t *targets,
                                  const float *gmax, const float *sumexp,
                                  int64_t N, int64_t Vl, int64_t vocab_start,
                                  int64_t valid_vocab, float dloss,
                                  float *dlogits);

/* The pieces that read the logits, on bf16 logits (and dlogits); gmax,
 * sumexp and tlogit stay fp32, and mrt_vocab_ce_loss_f32 serves both. */
MRT_API void mrt_vocab_ce_local_max_bf16(const mrt_bf16 *logits, int64_t N,
                                         int64_t Vl, int64_t vocab_start,
                                         int64_t valid_vocab, float *max);
MRT_API void mrt_vocab_ce_local_sumexp_bf16(const mrt_bf16 *logits,
                                            const int32_t *targets, int64_t N,
                                            int64_t Vl, int64_t vocab_start,
                                            int64_t valid_vocab,
                                            const float *gmax, float *sumexp,
                                            float *tlogit);
MRT_API void mrt_vocab_ce_bwd_bf16(const mrt_bf16 *logits,
                                   const int32_t *targets, const float *gmax,
                                   const float *sumexp, int64_t N, int64_t Vl,
                                   int64_t vocab_start, int64_t valid_vocab,
                                   float dloss, mrt_bf16 *dlogits);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_CROSS_ENTROPY_H */
