/* Dropout whose mask depends only on where an element sits in the global
 * tensor, never on which rank holds it.
 *
 * Each element draws 32 bits from a counter-based generator, Philox4x32-10
 * (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011):
 * key (seed), counter (global element index / 4, step, stream), and the
 * word index % 4 of the four the block gives. A rank computes the bits of
 * exactly the elements it holds, from their global indices, so a model
 * draws the same masks at every tensor-parallel size, sequence split,
 * data-parallel size and micro-batch count, and in the backward pass and a
 * recomputation without storing them. The CPU runtime, the CUDA kernels and
 * the emulator all use the functions below.
 *
 * The element is kept when its bits are at least mrt_dropout_threshold(rate)
 * and then scaled by 1 / (1 - rate). `stream` tells a model's dropout sites
 * apart (layer and place in the layer; the generators number them), `step`
 * is the training step (megatron_rt/contract.h's MGT_HP_STEP). */
#ifndef MEGATRON_RT_DROPOUT_H
#define MEGATRON_RT_DROPOUT_H

#include "megatron_rt/api.h"

#ifdef __CUDACC__
#define MRT_HOST_DEVICE __host__ __device__
#else
#define MRT_HOST_DEVICE
#endif

MRT_EXTERN_C_BEGIN

/* Philox4x32-10 of `counter` under `key`, in place. */
static inline MRT_HOST_DEVICE void mrt_philox4x32_10(uint32_t counter[4],
                                                      const uint32_t key[2]) {
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = (uint64_t)0xD2511F53u * counter[0];
    uint64_t p1 = (uint64_t)0xCD9E8D57u * counter[2];
    uint32_t c1 = counter[1], c3 = counter[3];
    counter[0] = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    counter[1] = (uint32_t)p1;
    counter[2] = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    counter[3] = (uint32_t)p0;
  }
}

/* The four words of block `block` (elements 4 block .. 4 block + 3) of a
 * site's stream. */
static inline MRT_HOST_DEVICE void
mrt_dropout_block(uint64_t seed, uint32_t step, uint32_t stream,
                  uint64_t block, uint32_t words[4]) {
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  words[0] = (uint32_t)block;
  words[1] = (uint32_t)(block >> 32);
  words[2] = step;
  words[3] = stream;
  mrt_philox4x32_10(words, key);
}

/* Elements whose bits are below this are dropped: rate * 2^32, rounded. */
static inline MRT_HOST_DEVICE uint32_t mrt_dropout_threshold(float rate) {
  return (uint32_t)((double)rate * 4294967296.0 + 0.5);
}

/* y = x * keep(e) / (1 - rate) for the elements e of a tensor of at most
 * three dimensions: x and y are [n0, n1, n2] (contiguous), the part of a
 * global [*, g1, g2] tensor starting at (o0, o1, o2), so element (i, j, k)
 * draws the bits of global index ((o0 + i) g1 + o1 + j) g2 + o2 + k. y may
 * alias x. rate is in [0, 1); seed, step and stream as above. */
MRT_API void mrt_dropout_f32(const float *x, float *y, int64_t n0, int64_t n1,
                             int64_t n2, int64_t o0, int64_t o1, int64_t o2,
                             int64_t g1, int64_t g2, float rate, int64_t seed,
                             int64_t step, int64_t stream);
MRT_API void mrt_dropout_bf16(const mrt_bf16 *x, mrt_bf16 *y, int64_t n0,
                              int64_t n1, int64_t n2, int64_t o0, int64_t o1,
                              int64_t o2, int64_t g1, int64_t g2, float rate,
                              int64_t seed, int64_t step, int64_t stream);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_DROPOUT_H */
