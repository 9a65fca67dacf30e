#include "megatron_rt/layernorm.h"

#include "../cuda_check.h"
#include "common.cuh"

// Layer norm and RMS norm (layer norm with a zero mean and no bias) share
// every kernel here, the norm a template argument.
//
// One warp per row: rows of GPT-2 are a few thousand elements, which 32
// lanes sweep four at a time when the rows allow, and the row's statistics are
// then warp shuffles, with no block barrier. The sweeps after the first read
// the row again from L1/L2 rather than holding a row of any length in
// registers.

namespace {

using mrt::cuda::computeStream;
using mrt::cuda::kWarpSize;

constexpr int kRowsPerBlock = mrt::cuda::kBlockThreads / kWarpSize;

enum class Norm { Layer, RMS };

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
// large next to the spread, unlike E[x^2] - E[x]^2; as on the CPU. RMS
// norm's mean is zero.
template <Norm kNorm, int kVec, typename T>
__device__ RowStats rowStats(const T *x, int cols, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  float mean = 0.0f;
  if constexpr (kNorm == Norm::Layer) {
    float sum = 0.0f;
    for (int c = lane * kVec; c < cols; c += kWarpSize * kVec) {
      float v[kVec];
      mrt::cuda::loadVec(x + c, v);
#pragma unroll
      for (int k = 0; k < kVec; ++k)
        sum += v[k];
    }
    mean = mrt::cuda::warpReduce(sum, mrt::cuda::SumOp{}) / cols;
  }
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

// Lane 0 stores the row's statistics (RMS norm has no mean).
template <Norm kNorm>
__device__ __forceinline__ void storeStats(RowStats s, float *mean,
                                           float *rstd, int64_t row) {
  if (threadIdx.x % kWarpSize != 0)
    return;
  if constexpr (kNorm == Norm::Layer)
    mean[row] = s.mean;
  rstd[row] = s.rstd;
}

// The warp's row normalised into y, its statistics stored by lane 0. y may
// alias x: each element is read and then written by one lane. b is read by
// layer norm only.
template <Norm kNorm, int kVec, typename T>
__device__ void normalizeRow(const T *x, const T *__restrict__ w,
                             const T *__restrict__ b, T *y,
                             float *__restrict__ mean,
                             float *__restrict__ rstd, int64_t row, int cols,
                             float eps) {
  const RowStats s = rowStats<kNorm, kVec>(x, cols, eps);
  storeStats<kNorm>(s, mean, rstd, row);
  for (int c = threadIdx.x % kWarpSize * kVec; c < cols;
       c += kWarpSize * kVec) {
    float v[kVec], wc[kVec], bc[kVec] = {};
    mrt::cuda::loadVec(x + c, v);
    mrt::cuda::loadVec(w + c, wc);
    if constexpr (kNorm == Norm::Layer)
      mrt::cuda::loadVec(b + c, bc);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      if constexpr (kNorm == Norm::Layer)
        v[k] = (v[k] - s.mean) * s.rstd * wc[k] + bc[k];
      else
        v[k] = v[k] * s.rstd * wc[k];
    }
    mrt::cuda::storeVec(y + c, v);
  }
}

template <Norm kNorm, int kVec, typename T>
__global__ void __launch_bounds__(mrt::cuda::kBlockThreads)
    layerNormForward(const T *x, const T *__restrict__ w,
                     const T *__restrict__ b, T *y,
                     float *__restrict__ mean, float *__restrict__ rstd,
                     int64_t rows, int cols, float eps) {
  const int64_t row = warpRow(rows);
  if (row < 0)
    return;
  normalizeRow<kNorm, kVec>(x + row * cols, w, b, y + row * cols, mean, rstd,
                            row, cols, eps);
}

// sum = x + (delta + bias) (x + delta for RMS norm, which has no bias), then
// the norm of sum. Each lane reads
// back only the columns it wrote itself, so the row needs no barrier. A bf16
// sum is normalised as stored (rounded): the statistics then describe the x
// that the backward reads, as in llm.c's fused residual kernel.
template <Norm kNorm, int kVec, typename T>
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
    float v[kVec], d[kVec], bias[kVec] = {};
    mrt::cuda::loadVec(x + offset + c, v);
    mrt::cuda::loadVec(delta + offset + c, d);
    if constexpr (kNorm == Norm::Layer)
      mrt::cuda::loadVec(deltaBias + c, bias);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      v[k] += d[k] + bias[k]; // x + (delta + bias), as on the CPU
    mrt::cuda::storeVec(sum + offset + c, v);
  }
  normalizeRow<kNorm, kVec>(sum + offset, w, b, y + offset, mean, rstd, row,
                            cols, eps);
}

template <Norm kNorm, int kVec, typename T>
__global__ void __launch_bounds__(mrt::cuda::kBlockThreads)
    layerNormStats(const T *__restrict__ x, float *__restrict__ mean,
                   float *__restrict__ rstd, int64_t rows, int cols,
                   float eps) {
  const int64_t row = warpRow(rows);
  if (row < 0)
    return;
  storeStats<kNorm>(rowStats<kNorm, kVec>(x + row * cols, cols, eps), mean,
                    rstd, row);
}

// The row's mean: RMS norm's is zero and not stored.
template <Norm kNorm>
__device__ __forceinline__ float rowMean(const float *mean, int64_t row) {
  if constexpr (kNorm == Norm::Layer)
    return mean[row];
  return 0.0f;
}

// The parameter gradients a norm has: its weight's and a layer norm's bias.
template <Norm kNorm>
constexpr int kParamGrads = kNorm == Norm::Layer ? 2 : 1;

// dw = sum_r dy * xhat and db = sum_r dy, a row at a time (common.cuh's
// row-chunk sums).
template <Norm kNorm, typename T> struct ParamGradRow {
  const T *dy, *x;
  const float *mean, *rstd;
  int64_t cols;
  template <int kVec>
  __device__ void row(int64_t r, int64_t c,
                      float (&sums)[kParamGrads<kNorm>][kVec]) const {
    float g[kVec], v[kVec];
    mrt::cuda::loadVec(dy + r * cols + c, g);
    mrt::cuda::loadVec(x + r * cols + c, v);
    const float m = rowMean<kNorm>(mean, r), s = rstd[r];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      sums[0][k] += g[k] * ((v[k] - m) * s);
      if constexpr (kNorm == Norm::Layer)
        sums[1][k] += g[k];
    }
  }
};

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w: the two
// means are the gradient flowing through the row's mean and rstd (RMS norm
// has no mean, so no mean(g)).
template <Norm kNorm, int kVec, typename T>
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
  const float m = rowMean<kNorm>(mean, row), s = rstd[row];
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
      kNorm == Norm::Layer
          ? mrt::cuda::warpReduce(sumG, mrt::cuda::SumOp{}) / cols
          : 0.0f;
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

template <Norm kNorm, typename T>
void layerNormFwd(const T *x, const T *w, const T *b, T *y, float *mean,
                  float *rstd, int64_t rows, int64_t cols, float eps) {
  if (rows == 0)
    return;
  const int n = mrt::checkedInt(cols, "norm columns");
  const bool vec4 = n % 4 == 0 && allVec4Aligned(x, w, b, y);
  auto kernel = vec4 ? layerNormForward<kNorm, 4, T>
                     : layerNormForward<kNorm, 1, T>;
  kernel<<<rowBlocks(rows), mrt::cuda::kBlockThreads, 0, computeStream()>>>(
      x, w, b, y, mean, rstd, rows, n, eps);
  MRT_CUDA_CHECK_LAUNCH();
}

template <Norm kNorm, typename T>
void residualLayerNormFwd(const T *x, const T *delta, const T *deltaBias,
                          T *sum, const T *w, const T *b, T *y, float *mean,
                          float *rstd, int64_t rows, int64_t cols, float eps) {
  if (rows == 0)
    return;
  const int n = mrt::checkedInt(cols, "norm columns");
  const bool vec4 =
      n % 4 == 0 && allVec4Aligned(x, delta, deltaBias, sum, w, b, y);
  auto kernel = vec4 ? residualLayerNormForward<kNorm, 4, T>
                     : residualLayerNormForward<kNorm, 1, T>;
  kernel<<<rowBlocks(rows), mrt::cuda::kBlockThreads, 0, computeStream()>>>(
      x, delta, deltaBias, sum, w, b, y, mean, rstd, rows, n, eps);
  MRT_CUDA_CHECK_LAUNCH();
}

template <Norm kNorm, typename T>
void layerNormStatsOf(const T *x, float *mean, float *rstd, int64_t rows,
                      int64_t cols, float eps) {
  if (rows == 0)
    return;
  const int n = mrt::checkedInt(cols, "norm columns");
  auto kernel = n % 4 == 0 && allVec4Aligned(x) ? layerNormStats<kNorm, 4, T>
                                                : layerNormStats<kNorm, 1, T>;
  kernel<<<rowBlocks(rows), mrt::cuda::kBlockThreads, 0, computeStream()>>>(
      x, mean, rstd, rows, n, eps);
  MRT_CUDA_CHECK_LAUNCH();
}

template <Norm kNorm, typename T>
void layerNormBwd(const T *dy, const T *x, const T *w, const float *mean,
                  const float *rstd, T *dx, float *dw, float *db, int64_t rows,
                  int64_t cols) {
  const int n = mrt::checkedInt(cols, "norm columns");
  if (n == 0)
    return;
  cudaStream_t stream = computeStream();
  const bool vec4 = n % 4 == 0 && allVec4Aligned(dy, x, w, dx);
  // The parameter gradients go first: dx may overwrite dy.
  float *paramGrads[kParamGrads<kNorm>];
  paramGrads[0] = dw;
  if constexpr (kNorm == Norm::Layer)
    paramGrads[1] = db;
  mrt::cuda::launchRowChunkSums<false>(
      rows, n, vec4, paramGrads, ParamGradRow<kNorm, T>{dy, x, mean, rstd, n});
  if (rows == 0)
    return; // no dx rows, and an empty grid is not a launch
  auto inputKernel = vec4 ? layerNormInputGrad<kNorm, 4, T>
                          : layerNormInputGrad<kNorm, 1, T>;
  inputKernel<<<rowBlocks(rows), mrt::cuda::kBlockThreads, 0, stream>>>(
      dy, x, w, mean, rstd, dx, rows, n);
  MRT_CUDA_CHECK_LAUNCH();
}

} // namespace

using mrt::cuda::asBf16;
using mrt::cuda::bf16;

extern "C" void mrt_layernorm_fwd_f32(const float *x, const float *w,
                                      const float *b, float *y, float *mean,
                                      float *rstd, int64_t rows, int64_t cols,
                                      float eps) {
  layerNormFwd<Norm::Layer>(x, w, b, y, mean, rstd, rows, cols, eps);
}

extern "C" void mrt_layernorm_fwd_bf16(const mrt_bf16 *x, const mrt_bf16 *w,
                                       const mrt_bf16 *b, mrt_bf16 *y,
                                       float *mean, float *rstd, int64_t rows,
                                       int64_t cols, float eps) {
  layerNormFwd<Norm::Layer>(asBf16(x), asBf16(w), asBf16(b), asBf16(y), mean, rstd, rows,
               cols, eps);
}

extern "C" void mrt_residual_layernorm_fwd_f32(
    const float *x, const float *delta, const float *delta_bias, float *sum,
    const float *w, const float *b, float *y, float *mean, float *rstd,
    int64_t rows, int64_t cols, float eps) {
  residualLayerNormFwd<Norm::Layer>(x, delta, delta_bias, sum, w, b, y, mean, rstd, rows,
                       cols, eps);
}

extern "C" void mrt_residual_layernorm_fwd_bf16(
    const mrt_bf16 *x, const mrt_bf16 *delta, const mrt_bf16 *delta_bias,
    mrt_bf16 *sum, const mrt_bf16 *w, const mrt_bf16 *b, mrt_bf16 *y,
    float *mean, float *rstd, int64_t rows, int64_t cols, float eps) {
  residualLayerNormFwd<Norm::Layer>(asBf16(x), asBf16(delta), asBf16(delta_bias),
                       asBf16(sum), asBf16(w), asBf16(b), asBf16(y), mean,
                       rstd, rows, cols, eps);
}

extern "C" void mrt_layernorm_stats_f32(const float *x, float *mean,
                                        float *rstd, int64_t rows,
                                        int64_t cols, float eps) {
  layerNormStatsOf<Norm::Layer>(x, mean, rstd, rows, cols, eps);
}

extern "C" void mrt_layernorm_stats_bf16(const mrt_bf16 *x, float *mean,
                                         float *rstd, int64_t rows,
                                         int64_t cols, float eps) {
  layerNormStatsOf<Norm::Layer>(asBf16(x), mean, rstd, rows, cols, eps);
}

extern "C" void mrt_layernorm_bwd_f32(const float *dy, const float *x,
                                      const float *w, const float *mean,
                                      const float *rstd, float *dx, float *dw,
                                      float *db, int64_t rows, int64_t cols) {
  layerNormBwd<Norm::Layer>(dy, x, w, mean, rstd, dx, dw, db, rows, cols);
}

extern "C" void mrt_layernorm_bwd_bf16(const mrt_bf16 *dy, const mrt_bf16 *x,
                                       const mrt_bf16 *w, const float *mean,
                                       const float *rstd, mrt_bf16 *dx,
                                       float *dw, float *db, int64_t rows,
                                       int64_t cols) {
  layerNormBwd<Norm::Layer>(asBf16(dy), asBf16(x), asBf16(w), mean, rstd, asBf16(dx), dw,
               db, rows, cols);
}

extern "C" void mrt_rmsnorm_fwd_f32(const float *x, const float *w, float *y,
                                    float *rstd, int64_t rows, int64_t cols,
                                    float eps) {
  layerNormFwd<Norm::RMS>(x, w, static_cast<const float *>(nullptr), y,
                          nullptr, rstd, rows, cols, eps);
}

extern "C" void mrt_rmsnorm_fwd_bf16(const mrt_bf16 *x, const mrt_bf16 *w,
                                     mrt_bf16 *y, float *rstd, int64_t rows,
                                     int64_t cols, float eps) {
  layerNormFwd<Norm::RMS>(asBf16(x), asBf16(w),
                          static_cast<const bf16 *>(nullptr), asBf16(y),
                          nullptr, rstd, rows, cols, eps);
}

extern "C" void mrt_residual_rmsnorm_fwd_f32(const float *x,
                                             const float *delta, float *sum,
                                             const float *w, float *y,
                                             float *rstd, int64_t rows,
                                             int64_t cols, float eps) {
  residualLayerNormFwd<Norm::RMS>(x, delta, static_cast<const float *>(nullptr),
                                  sum, w, static_cast<const float *>(nullptr),
                                  y, nullptr, rstd, rows, cols, eps);
}

extern "C" void mrt_residual_rmsnorm_fwd_bf16(const mrt_bf16 *x,
                                              const mrt_bf16 *delta,
                                              mrt_bf16 *sum, const mrt_bf16 *w,
                                              mrt_bf16 *y, float *rstd,
                                              int64_t rows, int64_t cols,
                                              float eps) {
  residualLayerNormFwd<Norm::RMS>(
      asBf16(x), asBf16(delta), static_cast<const bf16 *>(nullptr),
      asBf16(sum), asBf16(w), static_cast<const bf16 *>(nullptr), asBf16(y),
      nullptr, rstd, rows, cols, eps);
}

extern "C" void mrt_rmsnorm_stats_f32(const float *x, float *rstd,
                                      int64_t rows, int64_t cols, float eps) {
  layerNormStatsOf<Norm::RMS>(x, nullptr, rstd, rows, cols, eps);
}

extern "C" void mrt_rmsnorm_stats_bf16(const mrt_bf16 *x, float *rstd,
                                       int64_t rows, int64_t cols, float eps) {
  layerNormStatsOf<Norm::RMS>(asBf16(x), nullptr, rstd, rows, cols, eps);
}

extern "C" void mrt_rmsnorm_bwd_f32(const float *dy, const float *x,
                                    const float *w, const float *rstd,
                                    float *dx, float *dw, int64_t rows,
                                    int64_t cols) {
  layerNormBwd<Norm::RMS>(dy, x, w, nullptr, rstd, dx, dw, nullptr, rows,
                          cols);
}

extern "C" void mrt_rmsnorm_bwd_bf16(const mrt_bf16 *dy, const mrt_bf16 *x,
                                     const mrt_bf16 *w, const float *rstd,
                                     mrt_bf16 *dx, float *dw, int64_t rows,
                                     int64_t cols) {
  layerNormBwd<Norm::RMS>(asBf16(dy), asBf16(x), asBf16(w), nullptr, rstd,
                          asBf16(dx), dw, nullptr, rows, cols);
}
