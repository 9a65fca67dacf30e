// The part of CUDA that runtime/cuda/lib/kernels uses, for the CPU emulator:
// what the kernels include as <cuda_runtime.h> once transform.py has
// rewritten them. Device code becomes host code; emulator.cpp runs every
// CUDA thread of a block as a fiber (README.md). Whatever the kernels use
// and this file lacks fails to compile, so nothing is silently approximated.
#ifndef MEGATRON_RT_CUDA_EMULATOR_CUDA_RUNTIME_H
#define MEGATRON_RT_CUDA_EMULATOR_CUDA_RUNTIME_H

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

typedef struct CUstream_st *cudaStream_t;

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1)
      : x(x), y(y), z(z) {}
};

// 16-byte aligned as on the device, so a misaligned float4 access is as
// much undefined behaviour here as there (and UBSan can see it).
struct alignas(16) float4 {
  float x, y, z, w;
};

inline float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}

// CUDA's min overloads take two operands of one type.
template <typename T> T min(T a, T b) { return b < a ? b : a; }

// The IEEE round-to-nearest intrinsics: the host compiler builds the
// emulator with -ffp-contract=off, so plain operations round the same way.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }

namespace emu {

// The emulated thread's built-in variables, set by the scheduler whenever it
// switches to another CUDA thread.
inline uint3 currentThreadIdx, currentBlockIdx;
inline dim3 currentBlockDim, currentGridDim;

// <<<grid, block, sharedBytes, stream>>>; the stream is ignored (every call
// runs to completion before it returns, which any stream order allows).
struct LaunchConfig {
  LaunchConfig(dim3 grid, dim3 block, size_t sharedBytes = 0,
               cudaStream_t = nullptr)
      : grid(grid), block(block), sharedBytes(sharedBytes) {}
  dim3 grid;
  dim3 block;
  size_t sharedBytes;
};

// Runs `thread` once for every CUDA thread of the grid: blocks one after
// another, a block's threads as fibers switched at barriers.
void runGrid(const LaunchConfig &config, const std::function<void()> &thread);

// kernel<<<grid, block, bytes, stream>>>(args...), as transform.py writes
// it: the arguments are evaluated once, and each CUDA thread gets its own
// copy of them, as kernel parameters are.
template <typename Kernel, typename... Args>
void launch(const LaunchConfig &config, Kernel kernel, Args... args) {
  runGrid(config, [&] { kernel(args...); });
}

void syncThreads();
void syncWarp(unsigned mask);
// Lane `lane ^ laneMask`'s `bytes` at `value`, exchanged through the warp.
void shuffleXor(unsigned mask, const void *value, void *result, size_t bytes,
                int laneMask);

// Shared memory: `extern __shared__ T name[];` becomes dynamicShared<T>(),
// `__shared__ T name;` staticShared<T>(site) with a lambda unique to the
// declaration (and to each instantiation of an enclosing template).
void *dynamicSharedBase();
void *staticSharedBlock(const void *key, size_t bytes, size_t align);
unsigned sharedAddress(const void *generic);

template <typename T> T *dynamicShared() {
  return static_cast<T *>(dynamicSharedBase());
}

template <typename T, typename Site> T &staticShared(Site) {
  static const char key = 0;
  return *static_cast<T *>(staticSharedBlock(&key, sizeof(T), alignof(T)));
}

// The cp.async PTX the kernels hold in asm statements.
void cpAsync(unsigned sharedDst, const void *globalSrc, int copyBytes,
             int sourceBytes);
void cpAsyncCommitGroup();
void cpAsyncWaitGroup(int pending);

} // namespace emu

inline const uint3 &threadIdx = emu::currentThreadIdx;
inline const uint3 &blockIdx = emu::currentBlockIdx;
inline const dim3 &blockDim = emu::currentBlockDim;
inline const dim3 &gridDim = emu::currentGridDim;

inline void __syncthreads() { emu::syncThreads(); }

// The GPU ends the kernel and poisons the context; here the process ends,
// after what the kernel printed.
[[noreturn]] inline void __trap() {
  std::fflush(stdout);
  std::abort();
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::syncWarp(mask); }

template <typename T> T __shfl_xor_sync(unsigned mask, T value, int laneMask) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "a shuffle moves at most 8 bytes");
  T result;
  emu::shuffleXor(mask, &value, &result, sizeof(T), laneMask);
  return result;
}

inline size_t __cvta_generic_to_shared(const void *p) {
  return emu::sharedAddress(p);
}

// A block's threads run on one host thread and switch only at barriers, so
// a read-modify-write is atomic as it stands.
inline float atomicAdd(float *address, float value) {
  const float old = *address;
  *address = old + value;
  return old;
}

inline unsigned long long atomicCAS(unsigned long long *address,
                                    unsigned long long compare,
                                    unsigned long long value) {
  const unsigned long long old = *address;
  if (old == compare)
    *address = value;
  return old;
}

// Host API: device memory is host memory.
enum cudaError_t { cudaSuccess = 0 };
enum cudaMemcpyKind { cudaMemcpyDeviceToHost = 2 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

// Every failure ends the process in the emulator itself, with a message
// naming what went wrong, so the calls only ever succeed.
inline const char *cudaGetErrorString(cudaError_t) { return "no error"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }

namespace emu {
void *deviceAllocate(size_t bytes);
void deviceFree(void *p);
void checkSharedOptIn(int bytes);
} // namespace emu

template <typename T>
cudaError_t cudaMallocAsync(T **p, size_t bytes, cudaStream_t) {
  *p = static_cast<T *>(emu::deviceAllocate(bytes));
  return cudaSuccess;
}

inline cudaError_t cudaFreeAsync(void *p, cudaStream_t) {
  emu::deviceFree(p);
  return cudaSuccess;
}

inline cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes,
                                   cudaStream_t) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}

inline cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value,
                                     size_t width, size_t height,
                                     cudaStream_t) {
  for (size_t row = 0; row < height; ++row)
    std::memset(static_cast<char *>(p) + row * pitch, value, width);
  return cudaSuccess;
}

inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                   cudaMemcpyKind, cudaStream_t) {
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

template <typename Kernel>
cudaError_t cudaFuncSetAttribute(Kernel, cudaFuncAttribute, int value) {
  emu::checkSharedOptIn(value);
  return cudaSuccess;
}

#endif // MEGATRON_RT_CUDA_EMULATOR_CUDA_RUNTIME_H
