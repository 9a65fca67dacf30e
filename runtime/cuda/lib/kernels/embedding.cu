#include "megatron_rt/embedding.h"

#include "../cuda_check.h"
#include "common.cuh"

namespace {

using mrt::cuda::vec4Aligned;
using mrt::cuda::asBf16;
using mrt::cuda::loadVec;
using mrt::cuda::storeVec;
using mrt::cuda::vec4Aligned;

// Row of this rank's table slice holding `id`, or -1 when another rank has
// it: the vocabulary-parallel contract, so no id is an error here.
__device__ __forceinline__ int64_t localRow(int32_t id, int64_t vocabStart,
                                            int64_t Vl) {
  int64_t row = static_cast<int64_t>(id) - vocabStart;
  return row >= 0 && row < Vl ? row : -1;
}

template <typename T> struct EmbeddingForward {
  const T *table;
  const int32_t *ids;
  int64_t vocabStart, Vl, C;
  T *out;
  template <int kVec> __device__ void apply(int64_t i, int64_t c) const {
    const int64_t row = localRow(ids[i], vocabStart, Vl);
    float v[kVec] = {};
    if (row >= 0)
      loadVec(table + row * C + c, v);
    storeVec(out + i * C + c, v);
  }
};

// Repeated ids add into the same table row from different threads; the
// table's gradient is fp32 whatever dout is.
template <typename T> struct EmbeddingBackward {
  const T *dout;
  const int32_t *ids;
  int64_t vocabStart, Vl, C;
  float *dtable;
  template <int kVec> __device__ void apply(int64_t i, int64_t c) const {
    const int64_t row = localRow(ids[i], vocabStart, Vl);
    if (row < 0)
      return;
    float g[kVec];
    loadVec(dout + i * C + c, g);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      atomicAdd(dtable + row * C + c + k, g[k]);
  }
};

template <typename T>
void embeddingFwd(const T *table, const int32_t *ids, int64_t vocabStart,
                  int64_t Vl, int64_t C, int64_t N, T *out) {
  mrt::cuda::launchRowSweep(
      N, C, EmbeddingForward<T>{table, ids, vocabStart, Vl, C, out},
      vec4Aligned(table) && vec4Aligned(out));
}

template <typename T>
void embeddingBwd(const T *dout, const int32_t *ids, int64_t vocabStart,
                  int64_t Vl, int64_t C, int64_t N, float *dtable) {
  mrt::cuda::launchRowSweep(
      N, C, EmbeddingBackward<T>{dout, ids, vocabStart, Vl, C, dtable},
      vec4Aligned(dout));
}

} // namespace

extern "C" void mrt_embedding_fwd_f32(const float *table, const int32_t *ids,
                                      int64_t vocab_start, int64_t Vl,
                                      int64_t C, int64_t N, float *out) {
  embeddingFwd(table, ids, vocab_start, Vl, C, N, out);
}

extern "C" void mrt_embedding_fwd_bf16(const mrt_bf16 *table,
                                       const int32_t *ids, int64_t vocab_start,
                                       int64_t Vl, int64_t C, int64_t N,
                                       mrt_bf16 *out) {
  embeddingFwd(asBf16(table), ids, vocab_start, Vl, C, N, asBf16(out));
}

extern "C" void mrt_embedding_bwd_f32(const float *dout, const int32_t *ids,
                                      int64_t vocab_start, int64_t Vl,
                                      int64_t C, int64_t N, float *dtable) {
  embeddingBwd(dout, ids, vocab_start, Vl, C, N, dtable);
}

extern "C" void mrt_embedding_bwd_bf16(const mrt_bf16 *dout,
                                       const int32_t *ids, int64_t vocab_start,
                                       int64_t Vl, int64_t C, int64_t N,
                                       float *dtable) {
  embeddingBwd(asBf16(dout), ids, vocab_start, Vl, C, N, dtable);
}

