#include "megatron_rt/layernorm.h"

#include "../cuda_check.h"
#include "common.cuh"

// One warp per row: rows of GPT-2 are a few thousand elements, which 32
// lanes sweep four at a time when the rows allow, and the row's statistics are
// then warp shuffles, with no block barrier. The sweeps after the first read
// the row again from L1/L2 rather than holding a row of any length in
// registers.

namespace {

using mrt::cuda::computeStream;
using mrt::cuda::kWarpSize;

constexpr int kRowsPerBlock = mrt::cuda::kBlockThreads / kWarpSize;

struct RowStats {
  float mean;
  float rstd;
};

// The warp's row, or -1 past the last row.
__device__ __forceinline__ int64_t warpRow(int64_t rows) {
  int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kWarpSize;
  return row < rows ? row : -1;
}

// Two sweeps (mean, then squared deviations) stay accurate when |mean| is
// large next to the spread, unlike E[x^2] - E[x]^2; as on the CPU.
template <int kVec, typename T>
__device__ RowStats rowStats(const T *x, int cols, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  float sum = 0.0f;
  for (int c = lane * kVec; c < cols; c += kWarpSize * kVec) {
    float v[kVec];
    mrt::cuda::loadVec(x + c, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      sum += v[k];
  }
  const float mean = mrt::cuda::warpReduce(sum, mrt::cuda::SumOp{}) / cols;
  float sq = 0.0f;
  for (int c = lane * kVec; c < cols; c += kWarpSize * kVec) {
    float v[kVec];
    mrt::cuda::loadVec(x + c, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      sq += (v[k] - mean) * (v[k] - mean);
  }
  sq = mrt::cuda::warpReduce(sq, mrt::cuda::SumOp{});
  return {mean, 1.0f / sqrtf(sq / cols + eps)};
}

// The warp's row normalised into y, its statistics stored by lane 0. y may
// alias x: each element is read and then written by one lane.
template <int kVec, typename T>
__device__ void normalizeRow(const T *x, const T *__restrict__ w,
                             const T *__restrict__ b, T *y,
                             float *__restrict__ mean,
                             float *__restrict__ rstd, int64_t row, int cols,
                             float eps) {
  const RowStats s = rowStats<kVec>(x, cols, eps);
  if (threadIdx.x % kWarpSize == 0) {
    mean[row] = s.mean;
    rstd[row] = s.rstd;
  }
  for (int c = threadIdx.x % kWarpSize * kVec; c < cols;
       c += kWarpSize * kVec) {
    float v[kVec], wc[kVec], bc[kVec];
    mrt::cuda::loadVec(x + c, v);
    mrt::cuda::loadVec(w + c, wc);
    mrt::cuda::loadVec(b + c, bc);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      v[k] = (v[k] - s.mean) * s.rstd * wc[k] + bc[k];
    mrt::cuda::storeVec(y + c, v);
  }
}

template <int kVec, typename T>
__global__ void __launch_bounds__(mrt::cuda::kBlockThreads)
    layerNormForward(const T *x, const T *__restrict__ w,
                     const T *__restrict__ b, T *y,
                     float *__restrict__ mean, float *__restrict__ rstd,
                     int64_t rows, int cols, float eps) {
  const int64_t row = warpRow(rows);
  if (row < 0)
    return;
  normalizeRow<kVec>(x + row * cols, w, b, y + row * cols, mean, rstd, row,
                     cols, eps);
}

// sum = x + (delta + bias), then the layer norm of sum. Each lane reads
// back only the columns it wrote itself, so the row needs no barrier. A bf16
// sum is normalised as stored (rounded): the statistics then describe the x
// that the backward reads, as in llm.c's fused residual kernel.
template <int kVec, typename T>
__global__ void __launch_bounds__(mrt::cuda::kBlockThreads)
    residualLayerNormForward(const T *x, const T *delta,
                             const T *__restrict__ deltaBias, T *sum,
                             const T *__restrict__ w,
                             const T *__restrict__ b, T *__restrict__ y,
                             float *__restrict__ mean,
                             float *__restrict__ rstd, int64_t rows, int cols,
                             float eps) {
  const int64_t row = warpRow(rows);
  if (row < 0)
    return;
  const int64_t offset = row * cols;
  const int lane = threadIdx.x % kWarpSize;
  for (int c = lane * kVec; c < cols; c += kWarpSize * kVec) {
    float v[kVec], d[kVec], bias[kVec];
    mrt::cuda::loadVec(x + offset + c, v);
    mrt::cuda::loadVec(delta + offset + c, d);
    mrt::cuda::loadVec(deltaBias + c, bias);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      v[k] += d[k] + bias[k]; // x + (delta + bias), as on the CPU
    mrt::cuda::storeVec(sum + offset + c, v);
  }
  normalizeRow<kVec>(sum + offset, w, b, y + offset, mean, rstd, row, cols,
                     eps);
}

template <int kVec, typename T>
__global__ void __launch_bounds__(mrt::cuda::kBlockThreads)
    layerNormStats(const T *__restrict__ x, float *__restrict__ mean,
                   float *__restrict__ rstd, int64_t rows, int cols,
                   float eps) {
  const int64_t row = warpRow(rows);
  if (row < 0)
    return;
  const RowStats s = rowStats<kVec>(x + row * cols, cols, eps);
  if (threadIdx.x % kWarpSize == 0) {
    mean[row] = s.mean;
    rstd[row] = s.rstd;
  }
}

// dw = sum_r dy * xhat and db = sum_r dy, a row at a time (common.cuh's
// row-chunk sums).
template <typename T> struct ParamGradRow {
  const T *dy, *x;
  const float *mean, *rstd;
  int64_t cols;
  template <int kVec>
  __device__ void row(int64_t r, int64_t c, float (&sums)[2][kVec]) const {
    float g[kVec], v[kVec];
    mrt::cuda::loadVec(dy + r * cols + c, g);
    mrt::cuda::loadVec(x + r * cols + c, v);
    const float m = mean[r], s = rstd[r];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      sums[0][k] += g[k] * ((v[k] - m) * s);
      sums[1][k] += g[k];
    }
  }
};

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w: the two
// means are the gradient flowing through the row's mean and rstd.
template <int kVec, typename T>
__global__ void __launch_bounds__(mrt::cuda::kBlockThreads)
    layerNormInputGrad(const T *dy, const T *__restrict__ x,
                       const T *__restrict__ w,
                       const float *__restrict__ mean,
                       const float *__restrict__ rstd, T *dx, int64_t rows,
                       int cols) {
  const int64_t row = warpRow(rows);
  if (row < 0)
    return;
  const int lane = threadIdx.x % kWarpSize;
  const T *dyr = dy + row * cols, *xr = x + row * cols;
  T *dxr = dx + row * cols;
  const float m = mean[row], s = rstd[row];
  float sumG = 0.0f, sumGXhat = 0.0f;
  for (int c = lane * kVec; c < cols; c += kWarpSize * kVec) {
    float g[kVec], v[kVec], wc[kVec];
    mrt::cuda::loadVec(dyr + c, g);
    mrt::cuda::loadVec(xr + c, v);
    mrt::cuda::loadVec(w + c, wc);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float gw = g[k] * wc[k];
      sumG += gw;
      sumGXhat += gw * ((v[k] - m) * s);
    }
  }
  const float meanG =
      mrt::cuda::warpReduce(sumG, mrt::cuda::SumOp{}) / cols;
  const float meanGXhat =
      mrt::cuda::warpReduce(sumGXhat, mrt::cuda::SumOp{}) / cols;
  // dx may alias dy: each element is read and then written by one thread.
  for (int c = lane * kVec; c < cols; c += kWarpSize * kVec) {
    float g[kVec], v[kVec], wc[kVec];
    mrt::cuda::loadVec(dyr + c, g);
    mrt::cuda::loadVec(xr + c, v);
    mrt::cuda::loadVec(w + c, wc);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float xhat = (v[k] - m) * s;
      g[k] = s * (g[k] * wc[k] - meanG - xhat * meanGXhat);
    }
    mrt::cuda::storeVec(dxr + c, g);
  }
}

unsigned rowBlocks(int64_t rows) {
  return static_cast<unsigned>(mrt::cuda::ceilDiv(rows, kRowsPerBlock));
}

// Each host launcher below serves the _f32 entry point (T = float) and the
// _bf16 one (T = bf16).

// Whether every pointer allows 4-element groups.
template <typename... Ptrs> bool allVec4Aligned(const Ptrs *...p) {
  return (mrt::cuda::vec4Aligned(p) && ...);
}

template <typename T>
void layerNormFwd(const T *x, const T *w, const T *b, T *y, float *mean,
                  float *rstd, int64_t rows, int64_t cols, float eps) {
  if (rows == 0)
    return;
  const int n = mrt::checkedInt(cols, "layer norm columns");
  const bool vec4 = n % 4 == 0 && allVec4Aligned(x, w, b, y);
  auto kernel = vec4 ? layerNormForward<4, T> : layerNormForward<1, T>;
  kernel<<<rowBlocks(rows), mrt::cuda::kBlockThreads, 0, computeStream()>>>(
      x, w, b, y, mean, rstd, rows, n, eps);
  MRT_CUDA_CHECK_LAUNCH();
}

template <typename T>
void residualLayerNormFwd(const T *x, const T *delta, const T *deltaBias,
                          T *sum, const T *w, const T *b, T *y, float *mean,
                          float *rstd, int64_t rows, int64_t cols, float eps) {
  if (rows == 0)
    return;
  const int n = mrt::checkedInt(cols, "layer norm columns");
  const bool vec4 =
      n % 4 == 0 && allVec4Aligned(x, delta, deltaBias, sum, w, b, y);
  auto kernel = vec4 ? residualLayerNormForward<4, T>
                     : residualLayerNormForward<1, T>;
  kernel<<<rowBlocks(rows), mrt::cuda::kBlockThreads, 0, computeStream()>>>(
      x, delta, deltaBias, sum, w, b, y, mean, rstd, rows, n, eps);
  MRT_CUDA_CHECK_LAUNCH();
}

template <typename T>
void layerNormStatsOf(const T *x, float *mean, float *rstd, int64_t rows,
                      int64_t cols, float eps) {
  if (rows == 0)
    return;
  const int n = mrt::checkedInt(cols, "layer norm columns");
  auto kernel = n % 4 == 0 && allVec4Aligned(x) ? layerNormStats<4, T>
                                                : layerNormStats<1, T>;
  kernel<<<rowBlocks(rows), mrt::cuda::kBlockThreads, 0, computeStream()>>>(
      x, mean, rstd, rows, n, eps);
  MRT_CUDA_CHECK_LAUNCH();
}

template <typename T>
void layerNormBwd(const T *dy, const T *x, const T *w, const float *mean,
                  const float *rstd, T *dx, float *dw, float *db, int64_t rows,
                  int64_t cols) {
  const int n = mrt::checkedInt(cols, "layer norm columns");
  if (n == 0)
    return;
  cudaStream_t stream = computeStream();
  const bool vec4 = n % 4 == 0 && allVec4Aligned(dy, x, w, dx);
  // The parameter gradients go first: dx may overwrite dy.
  float *const paramGrads[2] = {dw, db};
  mrt::cuda::launchRowChunkSums<false>(rows, n, vec4, paramGrads,
                                       ParamGradRow<T>{dy, x, mean, rstd, n});
  if (rows == 0)
    return; // no dx rows, and an empty grid is not a launch
  auto inputKernel =
      vec4 ? layerNormInputGrad<4, T> : layerNormInputGrad<1, T>;
  inputKernel<<<rowBlocks(rows), mrt::cuda::kBlockThreads, 0, stream>>>(
      dy, x, w, mean, rstd, dx, rows, n);
  MRT_CUDA_CHECK_LAUNCH();
}

} // namespace

using mrt::cuda::asBf16;

extern "C" void mrt_layernorm_fwd_f32(const float *x, const float *w,
                                      const float *b, float *y, float *mean,
                                      float *rstd, int64_t rows, int64_t cols,
                                      float eps) {
  layerNormFwd(x, w, b, y, mean, rstd, rows, cols, eps);
}

extern "C" void mrt_layernorm_fwd_bf16(const mrt_bf16 *x, const mrt_bf16 *w,
                                       const mrt_bf16 *b, mrt_bf16 *y,
                                       float *mean, float *rstd, int64_t rows,
                                       int64_t cols, float eps) {
  layerNormFwd(asBf16(x), asBf16(w), asBf16(b), asBf16(y), mean, rstd, rows,
               cols, eps);
}

extern "C" void mrt_residual_layernorm_fwd_f32(
    const float *x, const float *delta, const float *delta_bias, float *sum,
    const float *w, const float *b, float *y, float *mean, float *rstd,
    int64_t rows, int64_t cols, float eps) {
  residualLayerNormFwd(x, delta, delta_bias, sum, w, b, y, mean, rstd, rows,
                       cols, eps);
}

extern "C" void mrt_residual_layernorm_fwd_bf16(
    const mrt_bf16 *x, const mrt_bf16 *delta, const mrt_bf16 *delta_bias,
    mrt_bf16 *sum, const mrt_bf16 *w, const mrt_bf16 *b, mrt_bf16 *y,
    float *mean, float *rstd, int64_t rows, int64_t cols, float eps) {
  residualLayerNormFwd(asBf16(x), asBf16(delta), asBf16(delta_bias),
                       asBf16(sum), asBf16(w), asBf16(b), asBf16(y), mean,
                       rstd, rows, cols, eps);
}

extern "C" void mrt_layernorm_stats_f32(const float *x, float *mean,
                                        float *rstd, int64_t rows,
                                        int64_t cols, float eps) {
  layerNormStatsOf(x, mean, rstd, rows, cols, eps);
}

extern "C" void mrt_layernorm_stats_bf16(const mrt_bf16 *x, float *mean,
                                         float *rstd, int64_t rows,
                                         int64_t cols, float eps) {
  layerNormStatsOf(asBf16(x), mean, rstd, rows, cols, eps);
}

extern "C" void mrt_layernorm_bwd_f32(const float *dy, const float *x,
                                      const float *w, const float *mean,
                                      const float *rstd, float *dx, float *dw,
                                      float *db, int64_t rows, int64_t cols) {
  layerNormBwd(dy, x, w, mean, rstd, dx, dw, db, rows, cols);
}

extern "C" void mrt_layernorm_bwd_bf16(const mrt_bf16 *dy, const mrt_bf16 *x,
                                       const mrt_bf16 *w, const float *mean,
                                       const float *rstd, mrt_bf16 *dx,
                                       float *dw, float *db, int64_t rows,
                                       int64_t cols) {
  layerNormBwd(asBf16(dy), asBf16(x), asBf16(w), mean, rstd, asBf16(dx), dw,
               db, rows, cols);
}
