#include "megatron_rt/gelu.h"

#include "../cuda_check.h"
#include "common.cuh"

namespace {

using mrt::cuda::vec4Aligned;
using mrt::cuda::loadVec;
using mrt::cuda::storeVec;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__device__ __forceinline__ float gelu(float x) {
  float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5f * x * (1.0f + t);
}

// d/dx of 0.5 x (1 + tanh(u(x))) = 0.5 (1 + t) + 0.5 x (1 - t^2) u'(x).
__device__ __forceinline__ float geluGrad(float x) {
  float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
  float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

// In the ops below, outputs may alias inputs: each element is read and then
// written by the same thread.

struct GeluForward {
  const float *x;
  float *y;
  template <int kVec> __device__ void apply(int64_t i) const {
    float v[kVec];
    loadVec(x + i, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      v[k] = gelu(v[k]);
    storeVec(y + i, v);
  }
};

struct GeluBackward {
  const float *x, *dy;
  float *dx;
  template <int kVec> __device__ void apply(int64_t i) const {
    float v[kVec], g[kVec];
    loadVec(x + i, v);
    loadVec(dy + i, g);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      g[k] *= geluGrad(v[k]);
    storeVec(dx + i, g);
  }
};

struct BiasGeluForward {
  const float *x, *bias;
  float *y;
  int64_t cols;
  template <int kVec> __device__ void apply(int64_t r, int64_t c) const {
    float v[kVec], b[kVec];
    loadVec(x + r * cols + c, v);
    loadVec(bias + c, b);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      v[k] = gelu(v[k] + b[k]);
    storeVec(y + r * cols + c, v);
  }
};

// dx = dy * gelu'(x + bias) for a row, whose dx the bias gradient sums
// (common.cuh's row-chunk sums).
struct BiasGeluBackward {
  const float *x, *bias, *dy;
  float *dx;
  int64_t cols;
  template <int kVec>
  __device__ void row(int64_t r, int64_t c, float (&sums)[1][kVec]) const {
    float v[kVec], g[kVec], b[kVec];
    loadVec(x + r * cols + c, v);
    loadVec(dy + r * cols + c, g);
    loadVec(bias + c, b);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      g[k] *= geluGrad(v[k] + b[k]);
      sums[0][k] += g[k];
    }
    storeVec(dx + r * cols + c, g);
  }
};

} // namespace

extern "C" void mrt_gelu_fwd_f32(const float *x, float *y, int64_t n) {
  mrt::cuda::launchElementwise(n, GeluForward{x, y},
                               vec4Aligned(x) && vec4Aligned(y));
}

extern "C" void mrt_gelu_bwd_f32(const float *x, const float *dy, float *dx,
                                 int64_t n) {
  mrt::cuda::launchElementwise(
      n, GeluBackward{x, dy, dx},
      vec4Aligned(x) && vec4Aligned(dy) && vec4Aligned(dx));
}

extern "C" void mrt_bias_gelu_fwd_f32(const float *x, const float *bias,
                                      float *y, int64_t rows, int64_t cols) {
  mrt::cuda::launchRowSweep(
      rows, cols, BiasGeluForward{x, bias, y, cols},
      vec4Aligned(x) && vec4Aligned(bias) && vec4Aligned(y));
}

extern "C" void mrt_bias_gelu_bwd_f32(const float *x, const float *bias,
                                      const float *dy, float *dx, float *dbias,
                                      int64_t rows, int64_t cols) {
  const bool vec4 = cols % 4 == 0 && vec4Aligned(x) && vec4Aligned(bias) &&
                    vec4Aligned(dy) && vec4Aligned(dx);
  float *const outs[1] = {dbias};
  mrt::cuda::launchRowChunkSums<true>(
      rows, cols, vec4, outs, BiasGeluBackward{x, bias, dy, dx, cols});
}
