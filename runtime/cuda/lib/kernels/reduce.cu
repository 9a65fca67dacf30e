// mrt_sum_rows_f32 and _bf16 in common.cuh's two deterministic passes:
// column groups by chunks of rows into partials, then the chunks in order, in
// double.
#include "megatron_rt/reduce.h"

#include "common.cuh"

namespace {

template <int kVec, typename T>
__global__ void __launch_bounds__(mrt::cuda::kBlockThreads)
    sumRowChunks(const T *__restrict__ x, int64_t rows, int64_t cols,
                 int64_t rowsEach, float *__restrict__ partials) {
  const int64_t c = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * kVec;
  if (c >= cols)
    return;
  float sum[kVec] = {};
  const int64_t first = blockIdx.y * rowsEach;
  const int64_t last = min(first + rowsEach, rows);
#pragma unroll 4
  for (int64_t r = first; r < last; ++r) {
    float v[kVec];
    mrt::cuda::loadVec(x + r * cols + c, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      sum[k] += v[k];
  }
  mrt::cuda::storeVec(partials + blockIdx.y * cols + c, sum);
}

// Serves mrt_sum_rows_f32 and _bf16; the sums are fp32 either way.
template <typename T>
void sumRows(const T *x, int64_t rows, int64_t cols, float *out) {
  const bool vec4 = cols % 4 == 0 && mrt::cuda::vec4Aligned(x);
  auto kernel = vec4 ? sumRowChunks<4, T> : sumRowChunks<1, T>;
  mrt::cuda::launchRowChunkSums<false>(
      rows, cols, vec4, out, [&](dim3 grid, int64_t rowsEach, float *partials) {
        kernel<<<grid, mrt::cuda::kBlockThreads, 0,
                 mrt::cuda::computeStream()>>>(x, rows, cols, rowsEach,
                                               partials);
      });
}

} // namespace

extern "C" void mrt_sum_rows_f32(const float *x, int64_t rows, int64_t cols,
                                 float *out) {
  sumRows(x, rows, cols, out);
}

extern "C" void mrt_sum_rows_bf16(const mrt_bf16 *x, int64_t rows,
                                  int64_t cols, float *out) {
  sumRows(mrt::cuda::asBf16(x), rows, cols, out);
}
