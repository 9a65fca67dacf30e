#include "megatron_rt/embedding.h"

#include "isa.h"
#include "vec.h"

#include <omp.h>

#include <cstring>

namespace {

// Row of this rank's table slice holding `id`, or -1 when another rank has it.
inline int64_t localRow(int32_t id, int64_t vocabStart, int64_t Vl) {
  int64_t row = static_cast<int64_t>(id) - vocabStart;
  return row >= 0 && row < Vl ? row : -1;
}

} // namespace

extern "C" void mrt_embedding_fwd_f32(const float *table, const int32_t *ids,
                                      int64_t vocab_start, int64_t Vl,
                                      int64_t C, int64_t N, float *out) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    int64_t row = localRow(ids[i], vocab_start, Vl);
    if (row < 0)
      std::memset(out + i * C, 0, C * sizeof(float));
    else
      std::memcpy(out + i * C, table + row * C, C * sizeof(float));
  }
}

extern "C" MRT_VECTOR_KERNEL void
mrt_embedding_bwd_f32(const float *dout, const int32_t *ids,
                      int64_t vocab_start, int64_t Vl, int64_t C, int64_t N,
                      float *dtable) {
  // Repeated ids add to the same table row, so threads split the columns
  // rather than the tokens: no two threads ever touch the same element.
#pragma omp parallel
  {
    int threads = omp_get_num_threads(), thread = omp_get_thread_num();
    int64_t begin = C * thread / threads, end = C * (thread + 1) / threads;
    for (int64_t i = 0; i < N; ++i) {
      int64_t row = localRow(ids[i], vocab_start, Vl);
      if (row >= 0)
        mrt::axpy(1.0f, dout + i * C + begin, dtable + row * C + begin,
                  end - begin);
    }
  }
}
