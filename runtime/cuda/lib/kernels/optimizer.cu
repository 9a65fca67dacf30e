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

