#include "megatron_rt/cross_entropy.h"

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

// sum_j exp(row[j] - shift) over n columns, row[j] <= shift.
double sumOfExps(const float *row, int64_t n, float shift) {
  double sum = 0.0;
  for (int64_t j0 = 0; j0 < n; j0 += kSumBlock) {
    int64_t end = std::min(n, j0 + kSumBlock);
    float block = 0.0f;
#pragma omp simd reduction(+ : block)
    for (int64_t j = j0; j < end; ++j)
      block += mrt::expNonPositive(row[j] - shift);
    sum += block;
  }
  return sum;
}

} // namespace

extern "C" MRT_VECTOR_KERNEL void
mrt_vocab_ce_local_max_f32(const float *logits, int64_t N, int64_t Vl,
                           int64_t vocab_start, int64_t valid_vocab,
                           float *max) {
  int64_t real = realColumns(Vl, vocab_start, valid_vocab);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i)
    max[i] = mrt::maxOf(logits + i * Vl, real);
}

extern "C" MRT_VECTOR_KERNEL void
mrt_vocab_ce_local_sumexp_f32(const float *logits, const int32_t *targets,
                              int64_t N, int64_t Vl, int64_t vocab_start,
                              int64_t valid_vocab, const float *gmax,
                              float *sumexp, float *tlogit) {
  int64_t real = realColumns(Vl, vocab_start, valid_vocab);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float *row = logits + i * Vl;
    sumexp[i] = static_cast<float>(sumOfExps(row, real, gmax[i]));
    int64_t col = localTarget(targets[i], vocab_start, real, valid_vocab);
    tlogit[i] = col >= 0 ? row[col] : 0.0f;
  }
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

extern "C" MRT_VECTOR_KERNEL void
mrt_vocab_ce_bwd_f32(const float *logits, const int32_t *targets,
                     const float *gmax, const float *sumexp, int64_t N,
                     int64_t Vl, int64_t vocab_start, int64_t valid_vocab,
                     float dloss, float *dlogits) {
  int64_t real = realColumns(Vl, vocab_start, valid_vocab);
  float rowScale = dloss / static_cast<float>(N);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float *row = logits + i * Vl;
    float *grad = dlogits + i * Vl;
    float probScale = rowScale / sumexp[i];
#pragma omp simd
    for (int64_t j = 0; j < real; ++j)
      grad[j] = mrt::expNonPositive(row[j] - gmax[i]) * probScale;
    std::fill(grad + real, grad + Vl, 0.0f);
    int64_t col = localTarget(targets[i], vocab_start, real, valid_vocab);
    if (col >= 0)
      grad[col] -= rowScale;
  }
}
