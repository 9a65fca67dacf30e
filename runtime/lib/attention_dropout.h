// Internal: the attention kernels' probability dropout, shared by the CPU
// kernels (attention.cpp) and the CUDA ones (cuda/lib/kernels/
// attention.cu), so that both drop the same probabilities.
//
// Probability (t, key) of query head h of sequence b is element
// ((b + batchOffset) * globalHeads + h + headOffset, t, key) of the global
// [B, H, T, T] probabilities, and draws megatron_rt/dropout.h's bits of that
// global index: the mask depends on where the probability sits in the
// model, not on which rank holds it.
#ifndef MEGATRON_RT_LIB_ATTENTION_DROPOUT_H
#define MEGATRON_RT_LIB_ATTENTION_DROPOUT_H

#include "megatron_rt/dropout.h"

#include "fatal.h"

#include <cstdint>

namespace mrt {

struct AttentionDropout {
  float rate = 0.0f;
  float scale = 1.0f;     // 1 / (1 - rate): a kept probability's factor
  uint32_t threshold = 0; // bits below it are dropped
  uint64_t seed = 0;
  uint32_t step = 0, stream = 0;
  int64_t batchOffset = 0, headOffset = 0, globalHeads = 0;

  MRT_HOST_DEVICE bool enabled() const { return rate > 0.0f; }

  // The global index of probability (t, key) of head h of sequence b, in a
  // sequence of T positions.
  MRT_HOST_DEVICE uint64_t index(int64_t b, int64_t h, int64_t T, int64_t t,
                                 int64_t key) const {
    return static_cast<uint64_t>(
        (((b + batchOffset) * globalHeads + h + headOffset) * T + t) * T +
        key);
  }

  // The factor of the probability at global index i: scale where it is
  // kept, 0 where it is dropped.
  MRT_HOST_DEVICE float factor(uint64_t i) const {
    uint32_t words[4];
    mrt_dropout_block(seed, step, stream, i / 4, words);
    return words[i % 4] >= threshold ? scale : 0.0f;
  }
};

// The attention entry points' dropout arguments for H local query heads,
// checked: a rate outside [0, 1), or heads past the global ones, end the
// process.
inline AttentionDropout attentionDropout(float rate, int64_t seed,
                                         int64_t step, int64_t stream,
                                         int64_t batchOffset,
                                         int64_t headOffset, int64_t H,
                                         int64_t globalHeads) {
  if (!(rate >= 0.0f && rate < 1.0f))
    fatal("attention: dropout rate %g is outside [0, 1)", rate);
  if (rate > 0.0f && headOffset + H > globalHeads)
    fatal("attention: heads %lld..%lld are outside the %lld global heads",
          static_cast<long long>(headOffset),
          static_cast<long long>(headOffset + H - 1),
          static_cast<long long>(globalHeads));
  AttentionDropout d;
  d.rate = rate;
  d.scale = 1.0f / (1.0f - rate);
  d.threshold = mrt_dropout_threshold(rate);
  d.seed = static_cast<uint64_t>(seed);
  d.step = static_cast<uint32_t>(step);
  d.stream = static_cast<uint32_t>(stream);
  d.batchOffset = batchOffset;
  d.headOffset = headOffset;
  d.globalHeads = globalHeads;
  return d;
}

} // namespace mrt

#endif // MEGATRON_RT_LIB_ATTENTION_DROPOUT_H
