#include "megatron_rt/dropout.h"

#include "../cuda_check.h"
#include "common.cuh"

// One thread per element, each drawing its own Philox block
// (megatron_rt/dropout.h) from its global index: the same bits as the CPU
// runtime's, which draws a block once per four elements of a row.

namespace {

using mrt::cuda::asBf16;
using mrt::cuda::fromFloat;
using mrt::cuda::toFloat;

template <typename T> struct DropElement {
  const T *x;
  T *y;
  int64_t n1, n2, o0, o1, o2, g1, g2;
  uint64_t seed;
  uint32_t step, stream, threshold;
  float scale;
  template <int kVec> __device__ void apply(int64_t first) const {
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      drop(first + k);
  }
  __device__ void drop(int64_t e) const {
    const int64_t k = e % n2, row = e / n2, j = row % n1, i = row / n1;
    const uint64_t index =
        static_cast<uint64_t>(((o0 + i) * g1 + o1 + j) * g2 + o2 + k);
    uint32_t words[4];
    mrt_dropout_block(seed, step, stream, index / 4, words);
    y[e] = fromFloat<T>(words[index % 4] >= threshold ? toFloat(x[e]) * scale
                                                      : 0.0f);
  }
};

template <typename T>
void dropout(const T *x, T *y, int64_t n0, int64_t n1, int64_t n2, int64_t o0,
             int64_t o1, int64_t o2, int64_t g1, int64_t g2, float rate,
             int64_t seed, int64_t step, int64_t stream) {
  if (!(rate >= 0.0f && rate < 1.0f))
    mrt::fatal("dropout: rate %g is outside [0, 1)", rate);
  mrt::cuda::launchElementwise(
      n0 * n1 * n2,
      DropElement<T>{x, y, n1, n2, o0, o1, o2, g1, g2,
                     static_cast<uint64_t>(seed), static_cast<uint32_t>(step),
                     static_cast<uint32_t>(stream),
                     mrt_dropout_threshold(rate), 1.0f / (1.0f - rate)},
      /*vec4=*/false);
}

} // namespace

extern "C" void mrt_dropout_f32(const float *x, float *y, int64_t n0,
                                int64_t n1, int64_t n2, int64_t o0, int64_t o1,
                                int64_t o2, int64_t g1, int64_t g2, float rate,
                                int64_t seed, int64_t step, int64_t stream) {
  dropout(x, y, n0, n1, n2, o0, o1, o2, g1, g2, rate, seed, step, stream);
}

extern "C" void mrt_dropout_bf16(const mrt_bf16 *x, mrt_bf16 *y, int64_t n0,
                                 int64_t n1, int64_t n2, int64_t o0,
                                 int64_t o1, int64_t o2, int64_t g1,
                                 int64_t g2, float rate, int64_t seed,
                                 int64_t step, int64_t stream) {
  dropout(asBf16(x), asBf16(y), n0, n1, n2, o0, o1, o2, g1, g2, rate, seed,
          step, stream);
}
