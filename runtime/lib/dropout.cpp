// Dropout by global element index (megatron_rt/dropout.h). Each row of the
// innermost dimension walks its global indices in blocks of four, one
// Philox call per block.
#include "megatron_rt/dropout.h"

#include "bf16.h"
#include "fatal.h"

namespace {

// Elements x [n0,n1,n2] at (o0,o1,o2) of a global [*, g1, g2] tensor.
struct Placement {
  int64_t n0, n1, n2, o0, o1, o2, g1, g2;
};

// The bits of the consecutive global indices first .. first + n - 1,
// handed to `visit(k, bits)` for k < n.
template <typename Visit>
void forEachBits(uint64_t seed, uint32_t step, uint32_t stream,
                 uint64_t first, int64_t n, Visit visit) {
  uint32_t words[4];
  uint64_t block = ~uint64_t{0};
  for (int64_t k = 0; k < n; ++k) {
    uint64_t index = first + static_cast<uint64_t>(k);
    if (index / 4 != block) {
      block = index / 4;
      mrt_dropout_block(seed, step, stream, block, words);
    }
    visit(k, words[index % 4]);
  }
}

template <typename T, typename Load, typename Store>
void dropout(const T *x, T *y, const Placement &p, float rate, int64_t seed,
             int64_t step, int64_t stream, Load load, Store store) {
  if (!(rate >= 0.0f && rate < 1.0f))
    mrt::fatal("dropout: rate %g is outside [0, 1)", rate);
  const uint32_t threshold = mrt_dropout_threshold(rate);
  const float scale = 1.0f / (1.0f - rate);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i = 0; i < p.n0; ++i)
    for (int64_t j = 0; j < p.n1; ++j) {
      const int64_t row = (i * p.n1 + j) * p.n2;
      const uint64_t first =
          static_cast<uint64_t>(((p.o0 + i) * p.g1 + p.o1 + j) * p.g2 + p.o2);
      forEachBits(static_cast<uint64_t>(seed), static_cast<uint32_t>(step),
                  static_cast<uint32_t>(stream), first, p.n2,
                  [&](int64_t k, uint32_t bits) {
                    float kept = bits >= threshold ? load(x[row + k]) * scale
                                                   : 0.0f;
                    y[row + k] = store(kept);
                  });
    }
}

} // namespace

extern "C" void mrt_dropout_f32(const float *x, float *y, int64_t n0,
                                int64_t n1, int64_t n2, int64_t o0, int64_t o1,
                                int64_t o2, int64_t g1, int64_t g2, float rate,
                                int64_t seed, int64_t step, int64_t stream) {
  dropout(x, y, Placement{n0, n1, n2, o0, o1, o2, g1, g2}, rate, seed, step,
          stream, [](float v) { return v; }, [](float v) { return v; });
}

extern "C" void mrt_dropout_bf16(const mrt_bf16 *x, mrt_bf16 *y, int64_t n0,
                                 int64_t n1, int64_t n2, int64_t o0,
                                 int64_t o1, int64_t o2, int64_t g1,
                                 int64_t g2, float rate, int64_t seed,
                                 int64_t step, int64_t stream) {
  dropout(x, y, Placement{n0, n1, n2, o0, o1, o2, g1, g2}, rate, seed, step,
          stream, mrt::widen, mrt::narrow);
}
