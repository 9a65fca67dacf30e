#include "megatron_rt/embedding.h"

#include "bf16.h"
#include "isa.h"

#include <omp.h>

#include <cstring>

namespace {

// Row of this rank's table slice holding `id`, or -1 when another rank has it.
inline int64_t localRow(int32_t id, int64_t vocabStart, int64_t Vl) {
  int64_t row = static_cast<int64_t>(id) - vocabStart;
  return row >= 0 && row < Vl ? row : -1;
}

// out[i] = the table's row of ids[i] (zeros where another rank holds it):
// copies of stored bits, the same for fp32 and bf16 rows of `rowBytes`.
void gatherRows(const void *table, const int32_t *ids, int64_t vocabStart,
                int64_t Vl, int64_t N, size_t rowBytes, void *out) {
  const auto *from = static_cast<const char *>(table);
  auto *to = static_cast<char *>(out);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    int64_t row = localRow(ids[i], vocabStart, Vl);
    if (row < 0)
      std::memset(to + i * rowBytes, 0, rowBytes);
    else
      std::memcpy(to + i * rowBytes, from + row * rowBytes, rowBytes);
  }
}

// dst[c] += src[c], src as stored (fp32 or bf16), dst fp32.
template <typename T> void addRow(const T *src, float *dst, int64_t n) {
#pragma omp simd
  for (int64_t c = 0; c < n; ++c)
    dst[c] += mrt::loadValue(src[c]);
}

// The driver takes dout's storage as an argument (layernorm.cpp says why
// not a template one).
enum class Storage { F32, BF16 };

MRT_VECTOR_KERNEL void scatterAdd(Storage storage, const void *dout,
                                  const int32_t *ids, int64_t vocabStart,
                                  int64_t Vl, int64_t C, int64_t N,
                                  float *dtable) {
  // Repeated ids add to the same table row, so threads split the columns
  // rather than the tokens: no two threads ever touch the same element.
#pragma omp parallel
  {
    int threads = omp_get_num_threads(), thread = omp_get_thread_num();
    int64_t begin = C * thread / threads, end = C * (thread + 1) / threads;
    for (int64_t i = 0; i < N; ++i) {
      int64_t row = localRow(ids[i], vocabStart, Vl);
      if (row < 0)
        continue;
      float *dst = dtable + row * C + begin;
      if (storage == Storage::F32)
        addRow(static_cast<const float *>(dout) + i * C + begin, dst,
               end - begin);
      else
        addRow(static_cast<const mrt_bf16 *>(dout) + i * C + begin, dst,
               end - begin);
    }
  }
}

} // namespace

extern "C" void mrt_embedding_fwd_f32(const float *table, const int32_t *ids,
                                      int64_t vocab_start, int64_t Vl,
                                      int64_t C, int64_t N, float *out) {
  gatherRows(table, ids, vocab_start, Vl, N, C * sizeof(float), out);
}

extern "C" void mrt_embedding_fwd_bf16(const mrt_bf16 *table,
                                       const int32_t *ids, int64_t vocab_start,
                                       int64_t Vl, int64_t C, int64_t N,
                                       mrt_bf16 *out) {
  gatherRows(table, ids, vocab_start, Vl, N, C * sizeof(mrt_bf16), out);
}

extern "C" void mrt_embedding_bwd_f32(const float *dout, const int32_t *ids,
                                      int64_t vocab_start, int64_t Vl,
                                      int64_t C, int64_t N, float *dtable) {
  scatterAdd(Storage::F32, dout, ids, vocab_start, Vl, C, N, dtable);
}

extern "C" void mrt_embedding_bwd_bf16(const mrt_bf16 *dout,
                                       const int32_t *ids, int64_t vocab_start,
                                       int64_t Vl, int64_t C, int64_t N,
                                       float *dtable) {
  scatterAdd(Storage::BF16, dout, ids, vocab_start, Vl, C, N, dtable);
}
