#include "megatron_rt/optimizer.h"

#include "../cuda_check.h"
#include "common.cuh"

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

using mrt::cuda::vec4Aligned;
using mrt::cuda::computeStream;
using mrt::cuda::kBlockThreads;
using mrt::cuda::loadVec;
using mrt::cuda::storeVec;

// torch.lerp's formula: the branch keeps the result exact at weight 0 and 1.
__device__ __forceinline__ float lerp(float from, float to, float weight) {
  return weight < 0.5f
             ? __fadd_rn(from, __fmul_rn(weight, __fsub_rn(to, from)))
             : __fsub_rn(to, __fmul_rn(__fsub_rn(to, from),
                                       __fsub_rn(1.0f, weight)));
}

// torch.optim.AdamW's single-tensor path operation by operation, with the
// scalar factors formed in double on the host and rounded to fp32 once, as
// PyTorch does. The _rn intrinsics forbid fusing a multiply and an add into
// an FMA, so every step rounds as the CPU runtime's does.
struct AdamW {
  float *p;
  const float *g;
  float *m, *v;
  float decay, mWeight, vDecay, vWeight, negStepSize, biasCorrection2Sqrt, eps;

  template <int kVec> __device__ void apply(int64_t i) const {
    float pv[kVec], gv[kVec], mv[kVec], vv[kVec];
    loadVec(p + i, pv);
    loadVec(g + i, gv);
    loadVec(m + i, mv);
    loadVec(v + i, vv);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      pv[k] = __fmul_rn(pv[k], decay);
      mv[k] = lerp(mv[k], gv[k], mWeight);
      vv[k] = __fadd_rn(__fmul_rn(vv[k], vDecay),
                        __fmul_rn(__fmul_rn(vWeight, gv[k]), gv[k]));
      const float denom =
          __fadd_rn(__fdiv_rn(__fsqrt_rn(vv[k]), biasCorrection2Sqrt), eps);
      pv[k] = __fadd_rn(pv[k], __fdiv_rn(__fmul_rn(negStepSize, mv[k]), denom));
    }
    storeVec(p + i, pv);
    storeVec(m + i, mv);
    storeVec(v + i, vv);
  }
};

struct Scale {
  float *x;
  float s;
  template <int kVec> __device__ void apply(int64_t i) const {
    float v[kVec];
    loadVec(x + i, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      v[k] *= s;
    storeVec(x + i, v);
  }
};

// First pass of the sum of squares: one double partial per block, from a
// grid-stride loop whose shape depends only on n, so the sum is
// deterministic. The n % kVec tail goes to the first threads.
template <int kVec>
__global__ void __launch_bounds__(kBlockThreads)
    sumSquaresPartials(const float *__restrict__ x, int64_t n,
                       double *__restrict__ partials) {
  __shared__ double warpSums[kBlockThreads / mrt::cuda::kWarpSize];
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t groups = n / kVec;
  double sum = 0.0;
  for (int64_t g = first; g < groups; g += stride) {
    float v[kVec];
    loadVec(x + g * kVec, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      sum += static_cast<double>(v[k]) * v[k];
  }
  if constexpr (kVec > 1)
    if (groups * kVec + first < n) {
      const double v = x[groups * kVec + first];
      sum += v * v;
    }
  sum = mrt::cuda::blockReduce(sum, warpSums, mrt::cuda::SumOp{}, 0.0);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = sum;
}

__global__ void __launch_bounds__(kBlockThreads)
    sumPartials(const double *__restrict__ partials, int count,
                double *__restrict__ total) {
  __shared__ double warpSums[kBlockThreads / mrt::cuda::kWarpSize];
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += kBlockThreads)
    sum += partials[i];
  sum = mrt::cuda::blockReduce(sum, warpSums, mrt::cuda::SumOp{}, 0.0);
  if (threadIdx.x == 0)
    *total = sum;
}

} // namespace

extern "C" void mrt_adamw_f32(float *p, const float *g, float *m, float *v,
                              int64_t n, double lr, double beta1, double beta2,
                              double eps, double weight_decay, int64_t step) {
  const double biasCorrection1 = 1.0 - std::pow(beta1, step);
  const double biasCorrection2 = 1.0 - std::pow(beta2, step);
  const AdamW op{p,
                 g,
                 m,
                 v,
                 static_cast<float>(1.0 - lr * weight_decay),
                 static_cast<float>(1.0 - beta1),
                 static_cast<float>(beta2),
                 static_cast<float>(1.0 - beta2),
                 static_cast<float>(-(lr / biasCorrection1)),
                 static_cast<float>(std::sqrt(biasCorrection2)),
                 static_cast<float>(eps)};
  mrt::cuda::launchElementwise(n, op,
                               vec4Aligned(p) && vec4Aligned(g) && vec4Aligned(m) &&
                                   vec4Aligned(v));
}

// No synchronisation: the total stays in device memory until mrt_sum_f64
// reads every gradient's at once.
extern "C" void mrt_sum_squares_f32(const float *x, int64_t n, double *sums,
                                    int64_t slot) {
  const bool vec4 = vec4Aligned(x);
  const unsigned blocks = n == 0 ? 0
                                 : mrt::cuda::gridStrideBlocks(
                                       vec4 ? mrt::cuda::ceilDiv(n, 4) : n);
  mrt::cuda::DeviceScratch<double> partials(std::max(blocks, 1u));
  if (blocks > 0) {
    auto kernel = vec4 ? sumSquaresPartials<4> : sumSquaresPartials<1>;
    kernel<<<blocks, kBlockThreads, 0, computeStream()>>>(x, n,
                                                           partials.get());
    MRT_CUDA_CHECK_LAUNCH();
  }
  sumPartials<<<1, kBlockThreads, 0, computeStream()>>>(
      partials.get(), static_cast<int>(blocks), sums + slot);
  MRT_CUDA_CHECK_LAUNCH();
}

extern "C" double mrt_sum_f64(const double *values, int64_t n) {
  std::vector<double> host(static_cast<size_t>(n));
  mrt::cuda::readArray(values, host.data(), host.size());
  double sum = 0.0;
  for (double value : host)
    sum += value;
  return sum;
}

extern "C" void mrt_scale_f32(float *x, int64_t n, float s) {
  mrt::cuda::launchElementwise(n, Scale{x, s}, vec4Aligned(x));
}
