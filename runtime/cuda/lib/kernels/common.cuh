// Internal to the CUDA kernels: launch shapes, storage types, vector access,
// reductions and stream-ordered scratch shared by the kernel files.
#ifndef MEGATRON_RT_CUDA_KERNELS_COMMON_CUH
#define MEGATRON_RT_CUDA_KERNELS_COMMON_CUH

#include "../cuda_check.h"
#include "megatron_rt/api.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace mrt::cuda {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// Threads of the memory-bound kernels: enough loads in flight per block, and
// a multiple of the warp size for the block reductions.
constexpr int kBlockThreads = 256;

// Grid-stride loops stop growing the grid here: about eight resident blocks
// of kBlockThreads per SM of an H100, beyond which blocks only add overhead.
constexpr int64_t kMaxGridBlocks = 1024;

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of kBlockThreads for a grid-stride loop over n > 0 items.
inline unsigned gridStrideBlocks(int64_t n) {
  return static_cast<unsigned>(
      std::min(ceilDiv(n, kBlockThreads), kMaxGridBlocks));
}

// Grid for a [rows, groups] sweep: x covers the column groups of a row (one
// per thread) and y strides over the rows, so no thread divides an element
// index by the row length.
inline dim3 rowSweepGrid(int64_t rows, int64_t groups) {
  int64_t x = ceilDiv(groups, kBlockThreads);
  int64_t y = std::clamp<int64_t>(kMaxGridBlocks / x, 1, 65535);
  return dim3(static_cast<unsigned>(x),
              static_cast<unsigned>(std::min(rows, y)));
}

// --- Storage types ----------------------------------------------------------
//
// Tensors are stored as float, or as bf16 for mixed precision; kernels
// template on the storage type and compute in fp32 either way, converting
// only at loads (exact) and stores (round to nearest even).

using bf16 = __nv_bfloat16;

// The ABI's bf16 (bits in a uint16_t) is __nv_bfloat16's representation.
static_assert(sizeof(bf16) == sizeof(mrt_bf16), "bf16 is two bytes");
inline const bf16 *asBf16(const mrt_bf16 *p) {
  return reinterpret_cast<const bf16 *>(p);
}
inline bf16 *asBf16(mrt_bf16 *p) { return reinterpret_cast<bf16 *>(p); }

template <typename T>
constexpr bool kStorageType =
    std::is_same_v<T, float> || std::is_same_v<T, bf16>;

template <typename To, typename From>
__device__ __forceinline__ To convert(From x) {
  static_assert(kStorageType<To> && kStorageType<From>, "storage type");
  if constexpr (std::is_same_v<To, From>)
    return x;
  else if constexpr (std::is_same_v<To, float>)
    return __bfloat162float(x);
  else
    return __float2bfloat16(x);
}

template <typename T> __device__ __forceinline__ float toFloat(T x) {
  return convert<float>(x);
}

template <typename T> __device__ __forceinline__ T fromFloat(float x) {
  return convert<T>(x);
}

// Four elements read or written as one access (16 bytes of float, 8 of
// bf16), which faults unless the group is aligned to its size.
template <typename T> struct alignas(4 * sizeof(T)) Group4 {
  T at[4];
};

template <typename T> bool vec4Aligned(const T *p) {
  return reinterpret_cast<uintptr_t>(p) % sizeof(Group4<T>) == 0;
}

// kVec consecutive elements of p into v, converted: one Group4 access when
// the caller proved alignment (kVec == 4), plain ones otherwise. float keeps
// float4, which nvcc is certain to turn into a single 16-byte load.
template <int kVec, typename T, typename V>
__device__ __forceinline__ void loadVec(const T *p, V (&v)[kVec]) {
  static_assert(kVec == 1 || kVec == 4, "vector width");
  if constexpr (kVec == 1) {
    v[0] = convert<V>(*p);
  } else if constexpr (std::is_same_v<T, float>) {
    const float4 t = *reinterpret_cast<const float4 *>(p);
    v[0] = convert<V>(t.x), v[1] = convert<V>(t.y);
    v[2] = convert<V>(t.z), v[3] = convert<V>(t.w);
  } else {
    const Group4<T> t = *reinterpret_cast<const Group4<T> *>(p);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      v[k] = convert<V>(t.at[k]);
  }
}

template <int kVec, typename T>
__device__ __forceinline__ void storeVec(T *p, const float (&v)[kVec]) {
  static_assert(kVec == 1 || kVec == 4, "vector width");
  if constexpr (kVec == 1) {
    *p = fromFloat<T>(v[0]);
  } else if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    Group4<T> t;
#pragma unroll
    for (int k = 0; k < 4; ++k)
      t.at[k] = fromFloat<T>(v[k]);
    *reinterpret_cast<Group4<T> *>(p) = t;
  }
}

// Drivers of the memory-bound kernels. An Op is a small struct of pointers
// and scalars (a kernel argument) with a member template apply<kVec>; kVec 4
// needs every pointer the op touches vec4Aligned, which the launchers'
// callers check.

// op.apply<kVec>(i) handles elements [i, i + kVec) of [0, n): kVec-wide
// groups in a grid-stride loop, then the n % kVec tail one element a thread.
template <int kVec, typename Op>
__global__ void __launch_bounds__(kBlockThreads)
    elementwiseKernel(int64_t n, Op op) {
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t groups = n / kVec;
  for (int64_t g = first; g < groups; g += stride)
    op.template apply<kVec>(g * kVec);
  if constexpr (kVec > 1)
    if (groups * kVec + first < n)
      op.template apply<1>(groups * kVec + first);
}

template <typename Op>
void launchElementwise(int64_t n, const Op &op, bool vec4) {
  if (n == 0)
    return;
  if (vec4)
    elementwiseKernel<4><<<gridStrideBlocks(ceilDiv(n, 4)), kBlockThreads, 0,
                           computeStream()>>>(n, op);
  else
    elementwiseKernel<1>
        <<<gridStrideBlocks(n), kBlockThreads, 0, computeStream()>>>(n, op);
  MRT_CUDA_CHECK_LAUNCH();
}

// op.apply<kVec>(r, c) handles columns [c, c + kVec) of row r of a
// [rows, cols] sweep (rowSweepGrid).
template <int kVec, typename Op>
__global__ void __launch_bounds__(kBlockThreads)
    rowSweepKernel(int64_t rows, int64_t cols, Op op) {
  const int64_t c = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * kVec;
  if (c >= cols)
    return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    op.template apply<kVec>(r, c);
}

// vec4 also needs cols % 4 == 0, which this checks.
template <typename Op>
void launchRowSweep(int64_t rows, int64_t cols, const Op &op, bool vec4) {
  if (rows == 0 || cols == 0)
    return;
  if (vec4 && cols % 4 == 0)
    rowSweepKernel<4><<<rowSweepGrid(rows, cols / 4), kBlockThreads, 0,
                        computeStream()>>>(rows, cols, op);
  else
    rowSweepKernel<1><<<rowSweepGrid(rows, cols), kBlockThreads, 0,
                        computeStream()>>>(rows, cols, op);
  MRT_CUDA_CHECK_LAUNCH();
}

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

// fmaxf drops a NaN operand, as the CPU's `x > m ? x : m` does.
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op>
__device__ __forceinline__ T warpReduce(T value, Op op) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

// Reduction over a block whose size is a multiple of the warp size; every
// thread gets the result. `partials` holds one value per warp. Every warp
// reduces the partials itself, which saves a broadcast and a barrier; the
// closing barrier lets callers reuse `partials` at once.
template <typename T, typename Op>
__device__ T blockReduce(T value, T *partials, Op op, T identity) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  value = warpReduce(value, op);
  if (lane == 0)
    partials[warp] = value;
  __syncthreads();
  value = lane < static_cast<int>(blockDim.x / kWarpSize) ? partials[lane]
                                                          : identity;
  value = warpReduce(value, op);
  __syncthreads();
  return value;
}

// Device memory for the duration of one ABI call. Allocation and release are
// ordered on the compute stream, so the buffer may be released as soon as the
// launches that use it are queued.
template <typename T> class DeviceScratch {
public:
  explicit DeviceScratch(int64_t count) {
    MRT_CUDA_CHECK(cudaMallocAsync(&data_, count * sizeof(T), computeStream()));
  }
  ~DeviceScratch() { MRT_CUDA_CHECK(cudaFreeAsync(data_, computeStream())); }
  DeviceScratch(const DeviceScratch &) = delete;
  DeviceScratch &operator=(const DeviceScratch &) = delete;
  T *get() const { return data_; }

private:
  T *data_ = nullptr;
};

// Sums over the rows of a [rows, cols] matrix run in two deterministic
// passes, with no atomics: the first gives each thread a group of columns
// and one chunk of consecutive rows, and writes partials [chunks, cols]; the
// second (sumColumnPartials) adds the chunks in order, in double.
struct ColumnChunks {
  int64_t count;    // chunks
  int64_t rowsEach; // rows per chunk (the last may have fewer)
};

// A sum over no rows: zeros, or nothing to add.
template <bool kAccumulate>
inline void sumOverNoRows(float *out, int64_t cols) {
  if (!kAccumulate)
    MRT_CUDA_CHECK(
        cudaMemsetAsync(out, 0, cols * sizeof(float), computeStream()));
}

// About 64K threads in the first pass hide memory latency; a floor of rows
// per chunk keeps the partials small next to the matrix itself, and the
// chunks (gridDim.y) stay within the grid's limit. rows > 0.
inline ColumnChunks planColumnChunks(int64_t rows, int64_t groups) {
  constexpr int64_t kTargetThreads = 64 * 1024, kMinRowsEach = 32;
  constexpr int64_t kMaxChunks = 4096;
  int64_t count = std::clamp<int64_t>(
      ceilDiv(kTargetThreads, groups), 1,
      std::min(ceilDiv(rows, kMinRowsEach), kMaxChunks));
  int64_t rowsEach = ceilDiv(rows, count);
  return {ceilDiv(rows, rowsEach), rowsEach};
}

inline dim3 columnChunksGrid(int64_t groups, const ColumnChunks &chunks) {
  return dim3(static_cast<unsigned>(ceilDiv(groups, kBlockThreads)),
              static_cast<unsigned>(chunks.count));
}

// out[c] = (or +=) sum over chunks of partials[chunk, c].
template <bool kAccumulate>
__global__ void __launch_bounds__(kBlockThreads)
    sumColumnPartials(const float *__restrict__ partials, int64_t chunks,
                      int64_t cols, float *__restrict__ out) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols;
       c += int64_t(gridDim.x) * blockDim.x) {
    double sum = 0.0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk)
      sum += partials[chunk * cols + c];
    out[c] = kAccumulate ? out[c] + static_cast<float>(sum)
                         : static_cast<float>(sum);
  }
}

template <bool kAccumulate>
inline void launchSumColumnPartials(const float *partials, int64_t chunks,
                                    int64_t cols, float *out) {
  sumColumnPartials<kAccumulate>
      <<<gridStrideBlocks(cols), kBlockThreads, 0, computeStream()>>>(
          partials, chunks, cols, out);
  MRT_CUDA_CHECK_LAUNCH();
}

// First pass: a thread takes kVec columns of one chunk of rows, and
// op.row<kVec>(r, c, sums) adds row r's terms to its kOutputs running sums
// (and may write a result of its own, as dx); the sums go to partials
// [kOutputs][chunks][cols].
template <int kVec, int kOutputs, typename Op>
__global__ void __launch_bounds__(kBlockThreads)
    rowChunkSums(int64_t rows, int64_t cols, int64_t rowsEach, Op op,
                 float *__restrict__ partials) {
  const int64_t c = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * kVec;
  if (c >= cols)
    return;
  float sums[kOutputs][kVec] = {};
  const int64_t first = blockIdx.y * rowsEach;
  const int64_t last = min(first + rowsEach, rows);
#pragma unroll 4
  for (int64_t r = first; r < last; ++r)
    op.template row<kVec>(r, c, sums);
  const int64_t outputStride = int64_t(gridDim.y) * cols;
#pragma unroll
  for (int o = 0; o < kOutputs; ++o)
    storeVec(partials + o * outputStride + blockIdx.y * cols + c, sums[o]);
}

// Both passes of kOutputs sums over rows into outs[o] [cols] (=, or += with
// kAccumulate); 4-column groups when vec4 (which needs cols % 4 == 0).
template <bool kAccumulate, int kOutputs, typename Op>
void launchRowChunkSums(int64_t rows, int64_t cols, bool vec4,
                        float *const (&outs)[kOutputs], const Op &op) {
  if (cols == 0)
    return;
  if (rows == 0) {
    for (float *out : outs)
      sumOverNoRows<kAccumulate>(out, cols);
    return;
  }
  const int64_t groups = vec4 ? cols / 4 : cols;
  const ColumnChunks chunks = planColumnChunks(rows, groups);
  DeviceScratch<float> partials(kOutputs * chunks.count * cols);
  auto kernel = vec4 ? rowChunkSums<4, kOutputs, Op>
                     : rowChunkSums<1, kOutputs, Op>;
  kernel<<<columnChunksGrid(groups, chunks), kBlockThreads, 0,
           computeStream()>>>(rows, cols, chunks.rowsEach, op, partials.get());
  MRT_CUDA_CHECK_LAUNCH();
  for (int o = 0; o < kOutputs; ++o)
    launchSumColumnPartials<kAccumulate>(
        partials.get() + o * chunks.count * cols, chunks.count, cols, outs[o]);
}

} // namespace mrt::cuda

#endif // MEGATRON_RT_CUDA_KERNELS_COMMON_CUH
