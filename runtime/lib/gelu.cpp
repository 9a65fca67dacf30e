#include "gelu.h"

#include "isa.h"
#include "megatron_rt/contract.h"
#include "vec.h"

#include <cmath>

MRT_VECTOR_KERNEL void mrt::gelu(const float *x, float *y, int64_t n) {
  constexpr float kSqrt2OverPi = MGT_GELU_SQRT_2_OVER_PI;
  constexpr float kCubic = MGT_GELU_CUBIC;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = mrt::tanhOf(kSqrt2OverPi * (v + kCubic * v * v * v));
    y[i] = 0.5f * v * (1.0f + t);
  }
}
