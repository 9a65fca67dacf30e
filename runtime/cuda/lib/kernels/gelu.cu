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

// dx = dy * gelu'(x + bias) for one chunk of rows, and the chunk's column
// sums of dx into partials [chunks][cols] (common.cuh's first pass).
template <int kVec>
__global__ void __launch_bounds__(mrt::cuda::kBlockThreads)
    biasGeluBackward(const float *x, const float *__restrict__ bias,
                     const float *dy, float *dx, int64_t rows, int64_t cols,
                     int64_t rowsEach, float *__restrict__ partials) {
  const int64_t c = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * kVec;
  if (c >= cols)
    return;
  float b[kVec], sum[kVec] = {};
  loadVec(bias + c, b);
  const int64_t first = blockIdx.y * rowsEach;
  const int64_t last = min(first + rowsEach, rows);
#pragma unroll 4
  for (int64_t r = first; r < last; ++r) {
    float v[kVec], g[kVec];
    loadVec(x + r * cols + c, v);
    loadVec(dy + r * cols + c, g);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      g[k] *= geluGrad(v[k] + b[k]);
      sum[k] += g[k];
    }
    storeVec(dx + r * cols + c, g);
  }
  storeVec(partials + blockIdx.y * cols + c, sum);
}

} // namespace

extern "C" void mrt_gelu_fwd_f32(const float *x, float *y, int64_t n) {
  mrt::cuda::launchElementwise(n, GeluForward{x, y},
                               vec4Aligned(x) && vec4Aligned(y));
}

extern "C" void mrt_gelu_bwd_f32(const float *x, const float *dy, float *dx,
                                 int64_t n) {
  mrt::cuda::launchElementwise(n, GeluBackward{x, dy, dx},
                               vec4Aligned(x) && vec4Aligned(dy) && vec4Aligned(dx));
}

extern "C" void mrt_bias_gelu_fwd_f32(const float *x, const float *bias,
                                      float *y, int64_t rows, int64_t cols) {
  mrt::cuda::launchRowSweep(rows, cols, BiasGeluForward{x, bias, y, cols},
                            vec4Aligned(x) && vec4Aligned(bias) && vec4Aligned(y));
}

extern "C" void mrt_bias_gelu_bwd_f32(const float *x, const float *bias,
                                      const float *dy, float *dx, float *dbias,
                                      int64_t rows, int64_t cols) {
  const bool vec4 = cols % 4 == 0 && vec4Aligned(x) && vec4Aligned(bias) &&
                    vec4Aligned(dy) && vec4Aligned(dx);
  auto kernel = vec4 ? biasGeluBackward<4> : biasGeluBackward<1>;
  mrt::cuda::launchRowChunkSums<true>(
      rows, cols, vec4, dbias,
      [&](dim3 grid, int64_t rowsEach, float *partials) {
        kernel<<<grid, mrt::cuda::kBlockThreads, 0,
                 mrt::cuda::computeStream()>>>(x, bias, dy, dx, rows, cols,
                                               rowsEach, partials);
      });
}
