#include "megatron_rt/cross_entropy.h"

#include "bf16.h"
#include "fatal.h"
#include "isa.h"
#include "vec.h"

#include <algorithm>
#include <cmath>

namespace {

// Columns [0, realColumns) of this rank's slice are real vocabulary entries;
// the rest (if any) is padding that must stay out of the softmax.
int64_t realColumns(int64_t Vl, int64_t vocabStart, int64_t validVocab) {
  return std::clamp<int64_t>(validVocab - vocabStart, 0, Vl);
}

// Local column of the row's target, or -1 when another rank holds it. A
// target outside the real vocabulary would make the loss meaningless.
int64_t localTarget(int32_t target, int64_t vocabStart, int64_t real,
                    int64_t validVocab) {
  if (target < 0 || target >= validVocab)
    mrt::fatal("cross-entropy target %d outside the vocabulary [0, %lld)",
               target, static_cast<long long>(validVocab));
  int64_t col = target - vocabStart;
  return col >= 0 && col < real ? col : -1;
}

// Columns per float partial sum. A double sum of every column converted
// each float and kept one chain of double adds: half the vector width, and
// twice the bwd pass's time for the same exps. Each lane of a float block
// sum adds a handful of values in [0, 1], so the blocks keep float's
// relative precision and the double sum of the blocks keeps the row's.
constexpr int64_t kSumBlock = 256;

// The row helpers read fp32 or bf16 logits as they are stored: bf16 logits
// are widened one value at a time, never copied whole (three passes over
// the LM head's [tokens, vocabulary] output otherwise). They are inlined
// into each vector copy of the drivers (isa.h).

template <typename T> float rowMax(const T *row, int64_t n) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) {
    const float v = mrt::loadValue(row[j]);
    m = v > m ? v : m;
  }
  return m;
}

// sum_j exp(row[j] - shift) over n columns, row[j] <= shift.
template <typename T> double sumOfExps(const T *row, int64_t n, float shift) {
  double sum = 0.0;
  for (int64_t j0 = 0; j0 < n; j0 += kSumBlock) {
    int64_t end = std::min(n, j0 + kSumBlock);
    float block = 0.0f;
#pragma omp simd reduction(+ : block)
    for (int64_t j = j0; j < end; ++j)
      block += mrt::expNonPositive(mrt::loadValue(row[j]) - shift);
    sum += block;
  }
  return sum;
}

// grad[j] = softmax(row)[j] * rowScale for the real columns, 0 for the
// padding, minus rowScale at the local target column (col >= 0): each
// value computed in fp32 and stored (rounded) once.
template <typename T>
void gradRow(const T *row, T *grad, int64_t real, int64_t Vl, float gmax,
             float probScale, float rowScale, int64_t col) {
  auto probability = [&](int64_t j) {
    return mrt::expNonPositive(mrt::loadValue(row[j]) - gmax) * probScale;
  };
#pragma omp simd
  for (int64_t j = 0; j < real; ++j)
    mrt::storeValue(grad[j], probability(j));
  std::fill(grad + real, grad + Vl, T{});
  if (col >= 0)
    mrt::storeValue(grad[col], probability(col) - rowScale);
}

// The drivers take the logits' storage as an argument (layernorm.cpp says
// why not a template one).
enum class Storage { F32, BF16 };

template <typename T> const T *rowOf(const void *base, int64_t i, int64_t Vl) {
  return static_cast<const T *>(base) + i * Vl;
}

MRT_VECTOR_KERNEL void localMax(Storage storage, const void *logits, int64_t N,
                                int64_t Vl, int64_t vocabStart,
                                int64_t validVocab, float *max) {
  const int64_t real = realColumns(Vl, vocabStart, validVocab);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i)
    max[i] = storage == Storage::F32
                 ? rowMax(rowOf<float>(logits, i, Vl), real)
                 : rowMax(rowOf<mrt_bf16>(logits, i, Vl), real);
}

MRT_VECTOR_KERNEL void localSumExp(Storage storage, const void *logits,
                                   const int32_t *targets, int64_t N,
                                   int64_t Vl, int64_t vocabStart,
                                   int64_t validVocab, const float *gmax,
                                   float *sumexp, float *tlogit) {
  const int64_t real = realColumns(Vl, vocabStart, validVocab);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const int64_t col = localTarget(targets[i], vocabStart, real, validVocab);
    if (storage == Storage::F32) {
      const float *row = rowOf<float>(logits, i, Vl);
      sumexp[i] = static_cast<float>(sumOfExps(row, real, gmax[i]));
      tlogit[i] = col >= 0 ? row[col] : 0.0f;
    } else {
      const mrt_bf16 *row = rowOf<mrt_bf16>(logits, i, Vl);
      sumexp[i] = static_cast<float>(sumOfExps(row, real, gmax[i]));
      tlogit[i] = col >= 0 ? mrt::widen(row[col]) : 0.0f;
    }
  }
}

MRT_VECTOR_KERNEL void backward(Storage storage, const void *logits,
                                const int32_t *targets, const float *gmax,
                                const float *sumexp, int64_t N, int64_t Vl,
                                int64_t vocabStart, int64_t validVocab,
                                float dloss, void *dlogits) {
  const int64_t real = realColumns(Vl, vocabStart, validVocab);
  const float rowScale = dloss / static_cast<float>(N);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const int64_t col = localTarget(targets[i], vocabStart, real, validVocab);
    const float probScale = rowScale / sumexp[i];
    if (storage == Storage::F32)
      gradRow(rowOf<float>(logits, i, Vl), static_cast<float *>(dlogits) + i * Vl,
              real, Vl, gmax[i], probScale, rowScale, col);
    else
      gradRow(rowOf<mrt_bf16>(logits, i, Vl),
              static_cast<mrt_bf16 *>(dlogits) + i * Vl, real, Vl, gmax[i],
              probScale, rowScale, col);
  }
}

} // namespace

extern "C" void mrt_vocab_ce_local_max_f32(const float *logits, int64_t N,
                                           int64_t Vl, int64_t vocab_start,
                                           int64_t valid_vocab, float *max) {
  localMax(Storage::F32, logits, N, Vl, vocab_start, valid_vocab, max);
}

extern "C" void mrt_vocab_ce_local_max_bf16(const mrt_bf16 *logits, int64_t N,
                                            int64_t Vl, int64_t vocab_start,
                                            int64_t valid_vocab, float *max) {
  localMax(Storage::BF16, logits, N, Vl, vocab_start, valid_vocab, max);
}

extern "C" void mrt_vocab_ce_local_sumexp_f32(
    const float *logits, const int32_t *targets, int64_t N, int64_t Vl,
    int64_t vocab_start, int64_t valid_vocab, const float *gmax, float *sumexp,
    float *tlogit) {
  localSumExp(Storage::F32, logits, targets, N, Vl, vocab_start, valid_vocab,
              gmax, sumexp, tlogit);
}

extern "C" void mrt_vocab_ce_local_sumexp_bf16(
    const mrt_bf16 *logits, const int32_t *targets, int64_t N, int64_t Vl,
    int64_t vocab_start, int64_t valid_vocab, const float *gmax, float *sumexp,
    float *tlogit) {
  localSumExp(Storage::BF16, logits, targets, N, Vl, vocab_start, valid_vocab,
              gmax, sumexp, tlogit);
}

extern "C" MRT_VECTOR_KERNEL float mrt_vocab_ce_loss_f32(const float *gmax,
                                                         const float *sumexp,
                                                         const float *tlogit,
                                                         int64_t N) {
  double total = 0.0;
#pragma omp parallel for reduction(+ : total) schedule(static)
  for (int64_t i = 0; i < N; ++i)
    total += std::log(static_cast<double>(sumexp[i])) + gmax[i] - tlogit[i];
  return static_cast<float>(total / N);
}

extern "C" void mrt_vocab_ce_bwd_f32(const float *logits,
                                     const int32_t *targets, const float *gmax,
                                     const float *sumexp, int64_t N,
                                     int64_t Vl, int64_t vocab_start,
                                     int64_t valid_vocab, float dloss,
                                     float *dlogits) {
  backward(Storage::F32, logits, targets, gmax, sumexp, N, Vl, vocab_start,
           valid_vocab, dloss, dlogits);
}

extern "C" void mrt_vocab_ce_bwd_bf16(const mrt_bf16 *logits,
                                      const int32_t *targets, const float *gmax,
                                      const float *sumexp, int64_t N,
                                      int64_t Vl, int64_t vocab_start,
                                      int64_t valid_vocab, float dloss,
                                      mrt_bf16 *dlogits) {
  backward(Storage::BF16, logits, targets, gmax, sumexp, N, Vl, vocab_start,
           valid_vocab, dloss, dlogits);
}
