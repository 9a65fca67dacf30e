#include "megatron_rt/attention.h"

#include "common.cuh"

#include <cmath>
#include <cstdio>

// Generation's attention on the GPU: the chunk's new keys and values go into
// the head-sharded cache, and each new query attends over its sequence's
// cached positions up to its own. Decoding has one query per (sequence,
// head), so a block owns one query: its scores (one row of at most N) live
// in shared memory, and the value sum gives each thread head-dim columns.
//
// The positions come from device memory, so the host cannot check them: a
// position outside the cache prints the sequence and traps, which fails the
// step's next CUDA call with the launch error (megatron-run checks every
// prompt against the context first, so this is a caller's bug).

namespace {

using mrt::cuda::blockReduce;
using mrt::cuda::computeStream;
using mrt::cuda::gridStrideBlocks;
using mrt::cuda::kBlockThreads;
using mrt::cuda::MaxOp;
using mrt::cuda::SumOp;

// H query heads, KV cache heads; `ld` the row stride of the chunk's input.
struct Shape {
  int64_t L, B, T, H, KV, D, N, ld;
};

__device__ int64_t cacheRow(const Shape &s, int64_t layer, int64_t b,
                            int64_t g, int64_t position) {
  return (((layer * s.B + b) * s.KV + g) * s.N + position) * s.D;
}

// Head h of token t of sequence b in a chunk input at row stride s.ld.
__device__ int64_t inputRow(const Shape &s, int64_t b, int64_t t, int64_t h) {
  return (b * s.T + t) * s.ld + h * s.D;
}

__device__ void checkPosition(const Shape &s, int64_t b, int64_t position) {
  if (position < 0 || position >= s.N) {
    printf("megatron_rt: generation: sequence %lld's token at position %lld "
           "is outside the KV cache of %lld positions\n",
           static_cast<long long>(b), static_cast<long long>(position),
           static_cast<long long>(s.N));
    __trap();
  }
}

// One thread per element of the chunk's [B, T, KV, D] keys or values.
__global__ void __launch_bounds__(kBlockThreads)
    storeChunk(const float *__restrict__ x, float *__restrict__ cache,
               const int32_t *__restrict__ positions, int64_t layer,
               Shape s) {
  const int64_t n = s.B * s.T * s.KV * s.D;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = i % s.D, g = (i / s.D) % s.KV,
                  t = (i / (s.D * s.KV)) % s.T, b = i / (s.D * s.KV * s.T);
    const int64_t position = positions[b] + t;
    checkPosition(s, b, position);
    cache[cacheRow(s, layer, b, g, position) + d] = x[inputRow(s, b, t, g) + d];
  }
}

// Block (b * H + h) * T + t: query t of head h of sequence b over cached
// positions [0, positions[b] + t] of cache head h / (H / KV). Dynamic
// shared memory: N scores.
__global__ void __launch_bounds__(kBlockThreads)
    attendCached(const float *__restrict__ queries,
                 const float *__restrict__ keys,
                 const float *__restrict__ values,
                 const int32_t *__restrict__ positions,
                 float *__restrict__ out, int64_t layer, Shape s) {
  extern __shared__ float scores[];
  __shared__ float partials[kBlockThreads / mrt::cuda::kWarpSize];
  const int64_t t = blockIdx.x % s.T, h = (blockIdx.x / s.T) % s.H,
                b = blockIdx.x / (s.T * s.H);
  const int64_t last = positions[b] + t;
  checkPosition(s, b, last);
  const float *q = queries + inputRow(s, b, t, h);
  const int64_t g = h / (s.H / s.KV);
  const float *k = keys + cacheRow(s, layer, b, g, 0);
  const float *v = values + cacheRow(s, layer, b, g, 0);
  const float scale = 1.0f / sqrtf(static_cast<float>(s.D));
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x) {
    float dot = 0.0f;
    for (int64_t d = 0; d < s.D; ++d)
      dot += q[d] * k[j * s.D + d];
    scores[j] = dot * scale;
    max = fmaxf(max, scores[j]);
  }
  max = blockReduce(max, partials, MaxOp{}, -INFINITY);
  float total = 0.0f;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x)
    total += scores[j] = expf(scores[j] - max);
  total = blockReduce(total, partials, SumOp{}, 0.0f);
  float *o = out + (b * s.T + t) * s.H * s.D + h * s.D;
  for (int64_t d = threadIdx.x; d < s.D; d += blockDim.x) {
    float sum = 0.0f;
    for (int64_t j = 0; j <= last; ++j)
      sum += scores[j] * v[j * s.D + d];
    o[d] = sum / total;
  }
}

} // namespace

namespace {
void checkLayer(int64_t layer, int64_t L) {
  if (layer < 0 || layer >= L)
    mrt::fatal("generation: layer %lld of a KV cache of %lld layers",
               static_cast<long long>(layer), static_cast<long long>(L));
}
} // namespace

extern "C" void mrt_kv_cache_store_f32(const float *x, int64_t ld,
                                       float *cache, const int32_t *positions,
                                       int64_t layer, int64_t L, int64_t B,
                                       int64_t T, int64_t KV, int64_t D,
                                       int64_t N) {
  checkLayer(layer, L);
  const Shape s{L, B, T, KV, KV, D, N, ld};
  const int64_t n = B * T * KV * D;
  if (n == 0)
    return;
  storeChunk<<<gridStrideBlocks(n), kBlockThreads, 0, computeStream()>>>(
      x, cache, positions, layer, s);
  MRT_CUDA_CHECK_LAUNCH();
}

extern "C" void mrt_attention_cached_f32(const float *q, int64_t ldq,
                                         const float *k_cache,
                                         const float *v_cache,
                                         const int32_t *positions, float *out,
                                         int64_t layer, int64_t L, int64_t B,
                                         int64_t T, int64_t H, int64_t KV,
                                         int64_t D, int64_t N) {
  checkLayer(layer, L);
  if (KV < 1 || H % KV != 0)
    mrt::fatal("generation: %lld cache heads do not divide %lld query heads",
               static_cast<long long>(KV), static_cast<long long>(H));
  const int64_t blocks = B * H * T;
  if (blocks == 0)
    return;
  const size_t scoreBytes = static_cast<size_t>(N) * sizeof(float);
  // Beyond the default 48 KiB a kernel must opt in; the H100/H200 allow
  // 227 KiB, a context of 58K positions.
  if (scoreBytes > 48 * 1024)
    MRT_CUDA_CHECK(cudaFuncSetAttribute(
        attendCached, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(scoreBytes)));
  attendCached<<<static_cast<unsigned>(blocks), kBlockThreads, scoreBytes,
                 computeStream()>>>(q, k_cache, v_cache, positions, out,
                                    layer, Shape{L, B, T, H, KV, D, N, ldq});
  MRT_CUDA_CHECK_LAUNCH();
}
