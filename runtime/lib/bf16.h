// Internal: bfloat16 storage for the CPU runtime's _bf16 entry points.
//
// The CPU bf16 step computes where the CUDA step does and rounds where it
// rounds, so that it is the GPU step's reference: the GEMMs take bf16
// operands with fp32 accumulation (gemm_bf16.cpp, on oneDNN's bf16 matmul),
// attention rounds its probabilities for its products (attention.cpp), and
// every other kernel computes in fp32 on the stored values, rounding each
// output once. The hot kernels read and write bf16 in place (loadValue,
// storeValue: the cross-entropy over the logits, the embedding); the rest
// widen their operands into pooled fp32 scratch (Widened), run the fp32
// kernel and round its outputs back (Narrowed).
#ifndef MEGATRON_RT_LIB_BF16_H
#define MEGATRON_RT_LIB_BF16_H

#include "megatron_rt/api.h"

#include "scratch.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace mrt {

inline float widen(mrt_bf16 value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

/// Round to nearest, ties to even (api.h's rounding).
inline mrt_bf16 narrow(float value) { return mrt_bf16_round(value); }

/// A stored value as fp32, and an fp32 value stored, for kernels that read
/// and write either storage in place.
inline float loadValue(float value) { return value; }
inline float loadValue(mrt_bf16 value) { return widen(value); }
inline void storeValue(float &slot, float value) { slot = value; }
inline void storeValue(mrt_bf16 &slot, float value) { slot = narrow(value); }

/// dst[i] = widen(src[i]) and dst[i] = narrow(src[i]) for i < n, split over
/// the OpenMP threads.
void widenInto(const mrt_bf16 *src, float *dst, int64_t n);
void narrowInto(const float *src, mrt_bf16 *dst, int64_t n);

/// An fp32 copy of a bf16 input.
class Widened {
public:
  Widened(const mrt_bf16 *source, int64_t n);
  const float *data() const { return values.data(); }

private:
  Scratch<float> values;
};

/// fp32 scratch for a kernel to write; its destructor rounds the result
/// into the bf16 destination. `Narrowed(dest, n, dest)` starts from dest's
/// values, for outputs the f32 kernel reads too (in place, or accumulating).
class Narrowed {
public:
  Narrowed(mrt_bf16 *destination, int64_t n,
           const mrt_bf16 *initial = nullptr);
  ~Narrowed();
  Narrowed(const Narrowed &) = delete;
  Narrowed &operator=(const Narrowed &) = delete;
  float *data() { return values.data(); }

private:
  mrt_bf16 *destination;
  int64_t n;
  Scratch<float> values;
};

/// `rows` rows of `cols` values at row stride `ld` (a section of a fused
/// tensor, or a whole one) as compact fp32 [rows, cols].
class WidenedRows {
public:
  WidenedRows(const mrt_bf16 *src, int64_t rows, int64_t cols, int64_t ld);
  float *data() { return values.data(); }

private:
  Scratch<float> values;
};

/// The inverse: compact fp32 rows rounded into a strided bf16 matrix, whose
/// other columns are left alone.
void narrowRows(const float *values, int64_t rows, int64_t cols,
                mrt_bf16 *dst, int64_t ld);

} // namespace mrt

#endif // MEGATRON_RT_LIB_BF16_H
