#include "megatron_rt/cross_entropy.h"

#include "../cuda_check.h"
#include "common.cuh"

#include <algorithm>
#include <cmath>

// One block per row of logits: a rank's vocabulary shard is thousands of
// columns, which the block sweeps with 4-element loads when rows allow.

namespace {

using mrt::cuda::computeStream;
using mrt::cuda::kBlockThreads;
using mrt::cuda::loadVec;

// A target outside [0, valid_vocab) is a data bug the CPU runtime ends the
// process for. A kernel cannot, so the first one seen is recorded here,
// packed as kBadTargetSeen | valid_vocab << 32 | uint32(target), and the
// loss, which synchronises anyway, reports it.
__device__ unsigned long long gBadTarget;
constexpr unsigned long long kBadTargetSeen = 1ull << 63;

struct LossResult {
  double total;
  unsigned long long badTarget;
};

// The shape of one rank's shard, as the kernels see it.
struct Shard {
  int64_t Vl;         // columns of a logits row
  int64_t real;       // columns [0, real) are vocabulary, the rest padding
  int64_t vocabStart; // global id of column 0
  int64_t validVocab;
};

Shard makeShard(int64_t Vl, int64_t vocabStart, int64_t validVocab) {
  // The bad-target record packs valid_vocab into 31 bits.
  mrt::checkedInt(validVocab, "valid vocabulary size");
  return {Vl, std::clamp<int64_t>(validVocab - vocabStart, 0, Vl), vocabStart,
          validVocab};
}

// Rows sweep 4-element groups when every row starts aligned to one.
template <typename T> bool rowsAligned(const T *logits, int64_t Vl) {
  return Vl % 4 == 0 && mrt::cuda::vec4Aligned(logits);
}

// Calls f(j, x) for each real column j of a row, x = row[j]. Groups of kVec
// never cross the end of the row (Vl % kVec == 0), only the end of the real
// columns, which the element test handles.
template <int kVec, typename T, typename F>
__device__ __forceinline__ void forRealColumns(const T *row,
                                               const Shard &s, F f) {
  for (int64_t j = threadIdx.x * int64_t(kVec); j < s.real;
       j += int64_t(kBlockThreads) * kVec) {
    float v[kVec];
    loadVec(row + j, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      if (j + k < s.real)
        f(j + k, v[k]);
  }
}

template <int kVec, typename T>
__global__ void __launch_bounds__(kBlockThreads)
    localMax(const T *__restrict__ logits, Shard s, float *__restrict__ max) {
  __shared__ float partials[kBlockThreads / mrt::cuda::kWarpSize];
  const T *row = logits + blockIdx.x * s.Vl;
  float m = -INFINITY;
  forRealColumns<kVec>(row, s, [&](int64_t, float x) { m = fmaxf(m, x); });
  m = mrt::cuda::blockReduce(m, partials, mrt::cuda::MaxOp{}, -INFINITY);
  if (threadIdx.x == 0)
    max[blockIdx.x] = m;
}

template <int kVec, typename T>
__global__ void __launch_bounds__(kBlockThreads)
    localSumExp(const T *__restrict__ logits,
                const int32_t *__restrict__ targets, Shard s,
                const float *__restrict__ gmax, float *__restrict__ sumexp,
                float *__restrict__ tlogit) {
  __shared__ double partials[kBlockThreads / mrt::cuda::kWarpSize];
  const int64_t i = blockIdx.x;
  const T *row = logits + i * s.Vl;
  const float rowMax = gmax[i];
  // Double, as on the CPU: a sum over tens of thousands of columns.
  double sum = 0.0;
  forRealColumns<kVec>(row, s,
                       [&](int64_t, float x) { sum += expf(x - rowMax); });
  sum = mrt::cuda::blockReduce(sum, partials, mrt::cuda::SumOp{}, 0.0);
  if (threadIdx.x != 0)
    return;
  sumexp[i] = static_cast<float>(sum);
  const int32_t target = targets[i];
  if (target < 0 || target >= s.validVocab)
    atomicCAS(&gBadTarget, 0ull,
              kBadTargetSeen |
                  static_cast<unsigned long long>(s.validVocab) << 32 |
                  static_cast<uint32_t>(target));
  const int64_t col = target - s.vocabStart;
  tlogit[i] = col >= 0 && col < s.real ? mrt::cuda::toFloat(row[col]) : 0.0f;
}

// Every row in order, in double: deterministic, and N is small (tokens).
__global__ void __launch_bounds__(kBlockThreads)
    meanLoss(const float *__restrict__ gmax, const float *__restrict__ sumexp,
             const float *__restrict__ tlogit, int64_t N,
             LossResult *__restrict__ result) {
  __shared__ double partials[kBlockThreads / mrt::cuda::kWarpSize];
  double total = 0.0;
  for (int64_t i = threadIdx.x; i < N; i += kBlockThreads)
    total += log(static_cast<double>(sumexp[i])) + gmax[i] - tlogit[i];
  total = mrt::cuda::blockReduce(total, partials, mrt::cuda::SumOp{}, 0.0);
  if (threadIdx.x == 0)
    *result = {total, gBadTarget};
}

// dlogits may alias logits: each element is read and then written by one
// thread, the target column included.
template <int kVec, typename T>
__global__ void __launch_bounds__(kBlockThreads)
    vocabBackward(const T *logits, const int32_t *__restrict__ targets,
                  const float *__restrict__ gmax,
                  const float *__restrict__ sumexp, Shard s, float rowScale,
                  T *dlogits) {
  const int64_t i = blockIdx.x;
  const T *row = logits + i * s.Vl;
  T *grad = dlogits + i * s.Vl;
  const float rowMax = gmax[i], probScale = rowScale / sumexp[i];
  // A bad target was reported by the loss; here it is simply not local.
  const int64_t target = targets[i] - s.vocabStart;
  for (int64_t j = threadIdx.x * int64_t(kVec); j < s.Vl;
       j += int64_t(kBlockThreads) * kVec) {
    float v[kVec];
    loadVec(row + j, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int64_t col = j + k;
      float g = col < s.real ? expf(v[k] - rowMax) * probScale : 0.0f;
      if (col == target && col < s.real)
        g -= rowScale;
      v[k] = g;
    }
    mrt::cuda::storeVec(grad + j, v);
  }
}

unsigned rowBlocks(int64_t N) {
  return static_cast<unsigned>(mrt::checkedInt(N, "cross-entropy rows"));
}

// The host launchers of the pieces that read logits serve the _f32 entry
// points (T = float) and the _bf16 ones (T = bf16); the statistics are fp32
// either way.

template <typename T>
void vocabLocalMax(const T *logits, int64_t N, int64_t Vl, int64_t vocabStart,
                   int64_t validVocab, float *max) {
  if (N == 0)
    return;
  const Shard s = makeShard(Vl, vocabStart, validVocab);
  auto kernel = rowsAligned(logits, Vl) ? localMax<4, T> : localMax<1, T>;
  kernel<<<rowBlocks(N), kBlockThreads, 0, computeStream()>>>(logits, s, max);
  MRT_CUDA_CHECK_LAUNCH();
}

template <typename T>
void vocabLocalSumExp(const T *logits, const int32_t *targets, int64_t N,
                      int64_t Vl, int64_t vocabStart, int64_t validVocab,
                      const float *gmax, float *sumexp, float *tlogit) {
  if (N == 0)
    return;
  const Shard s = makeShard(Vl, vocabStart, validVocab);
  auto kernel =
      rowsAligned(logits, Vl) ? localSumExp<4, T> : localSumExp<1, T>;
  kernel<<<rowBlocks(N), kBlockThreads, 0, computeStream()>>>(
      logits, targets, s, gmax, sumexp, tlogit);
  MRT_CUDA_CHECK_LAUNCH();
}

template <typename T>
void vocabBwd(const T *logits, const int32_t *targets, const float *gmax,
              const float *sumexp, int64_t N, int64_t Vl, int64_t vocabStart,
              int64_t validVocab, float dloss, T *dlogits) {
  if (N == 0)
    return;
  const Shard s = makeShard(Vl, vocabStart, validVocab);
  const float rowScale = dloss / static_cast<float>(N);
  auto kernel = rowsAligned(logits, Vl) && mrt::cuda::vec4Aligned(dlogits)
                    ? vocabBackward<4, T>
                    : vocabBackward<1, T>;
  kernel<<<rowBlocks(N), kBlockThreads, 0, computeStream()>>>(
      logits, targets, gmax, sumexp, s, rowScale, dlogits);
  MRT_CUDA_CHECK_LAUNCH();
}

} // namespace

using mrt::cuda::asBf16;

extern "C" void mrt_vocab_ce_local_max_f32(const float *logits, int64_t N,
                                           int64_t Vl, int64_t vocab_start,
                                           int64_t valid_vocab, float *max) {
  vocabLocalMax(logits, N, Vl, vocab_start, valid_vocab, max);
}

extern "C" void mrt_vocab_ce_local_max_bf16(const mrt_bf16 *logits, int64_t N,
                                            int64_t Vl, int64_t vocab_start,
                                            int64_t valid_vocab, float *max) {
  vocabLocalMax(asBf16(logits), N, Vl, vocab_start, valid_vocab, max);
}

extern "C" void mrt_vocab_ce_local_sumexp_f32(const float *logits,
                                              const int32_t *targets, int64_t N,
                                              int64_t Vl, int64_t vocab_start,
                                              int64_t valid_vocab,
                                              const float *gmax, float *sumexp,
                                              float *tlogit) {
  vocabLocalSumExp(logits, targets, N, Vl, vocab_start, valid_vocab, gmax,
                   sumexp, tlogit);
}

extern "C" void mrt_vocab_ce_local_sumexp_bf16(
    const mrt_bf16 *logits, const int32_t *targets, int64_t N, int64_t Vl,
    int64_t vocab_start, int64_t valid_vocab, const float *gmax, float *sumexp,
    float *tlogit) {
  vocabLocalSumExp(asBf16(logits), targets, N, Vl, vocab_start, valid_vocab,
                   gmax, sumexp, tlogit);
}

extern "C" float mrt_vocab_ce_loss_f32(const float *gmax, const float *sumexp,
                                       const float *tlogit, int64_t N) {
  if (N == 0)
    return NAN; // the mean of no rows, as the CPU's 0.0 / 0
  mrt::cuda::DeviceScratch<LossResult> result(1);
  meanLoss<<<1, kBlockThreads, 0, computeStream()>>>(gmax, sumexp, tlogit, N,
                                                     result.get());
  MRT_CUDA_CHECK_LAUNCH();
  const LossResult host = mrt::cuda::readScalar(result.get());
  if (host.badTarget & kBadTargetSeen)
    mrt::fatal("cross-entropy target %d outside the vocabulary [0, %lld)",
               static_cast<int32_t>(host.badTarget & 0xffffffffu),
               static_cast<long long>((host.badTarget & ~kBadTargetSeen) >>
                                      32));
  return static_cast<float>(host.total / N);
}

extern "C" void mrt_vocab_ce_bwd_f32(const float *logits,
                                     const int32_t *targets, const float *gmax,
                                     const float *sumexp, int64_t N, int64_t Vl,
                                     int64_t vocab_start, int64_t valid_vocab,
                                     float dloss, float *dlogits) {
  vocabBwd(logits, targets, gmax, sumexp, N, Vl, vocab_start, valid_vocab,
           dloss, dlogits);
}

extern "C" void mrt_vocab_ce_bwd_bf16(const mrt_bf16 *logits,
                                      const int32_t *targets, const float *gmax,
                                      const float *sumexp, int64_t N,
                                      int64_t Vl, int64_t vocab_start,
                                      int64_t valid_vocab, float dloss,
                                      mrt_bf16 *dlogits) {
  vocabBwd(asBf16(logits), targets, gmax, sumexp, N, Vl, vocab_start,
           valid_vocab, dloss, asBf16(dlogits));
}
