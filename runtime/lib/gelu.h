// GELU, tanh form (megatron_rt/contract.h's constants): the epilogue of the
// CPU runtime's fused GEMM + bias + GELU. Elementwise GELU and its gradient
// elsewhere are generated code.
#ifndef MEGATRON_RT_LIB_GELU_H
#define MEGATRON_RT_LIB_GELU_H

#include "megatron_rt/contract.h"
#include "vec.h"

#include <cstdint>

namespace mrt {

/// One value's GELU: inline so that `omp simd` loops over fp32 and bf16
/// storage vectorise the same formula.
inline float geluOf(float v) {
  constexpr float kSqrt2OverPi = MGT_GELU_SQRT_2_OVER_PI;
  constexpr float kCubic = MGT_GELU_CUBIC;
  const float t = tanhOf(kSqrt2OverPi * (v + kCubic * v * v * v));
  return 0.5f * v * (1.0f + t);
}

// y[i] = gelu(x[i]) for i < n; y may alias x.
void gelu(const float *x, float *y, int64_t n);

} // namespace mrt

#endif // MEGATRON_RT_LIB_GELU_H
