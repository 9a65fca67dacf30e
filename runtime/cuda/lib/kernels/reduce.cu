// mrt_sum_rows_f32 and _bf16 in common.cuh's two deterministic passes:
// column groups by chunks of rows into partials, then the chunks in order, in
// double.
#include "megatron_rt/reduce.h"

#include "common.cuh"

namespace {

template <typename T> struct RowSum {
  const T *x;
  int64_t cols;
  template <int kVec>
  __device__ void row(int64_t r, int64_t c, float (&sums)[1][kVec]) const {
    float v[kVec];
    mrt::cuda::loadVec(x + r * cols + c, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      sums[0][k] += v[k];
  }
};

// Serves mrt_sum_rows_f32 and _bf16; the sums are fp32 either way.
template <typename T>
void sumRows(const T *x, int64_t rows, int64_t cols, float *out) {
  const bool vec4 = cols % 4 == 0 && mrt::cuda::vec4Aligned(x);
  float *const outs[1] = {out};
  mrt::cuda::launchRowChunkSums<false>(rows, cols, vec4, outs,
                                       RowSum<T>{x, cols});
}

} // namespace

extern "C" void mrt_sum_rows_f32(const float *x, int64_t rows, int64_t cols,
                                 float *out) {
  sumRows(x, rows, cols, out);
}

extern "C" void mrt_sum_rows_bf16(const mrt_bf16 *x, int64_t rows,
                                  int64_t cols, float *out) {
  sumRows(mrt::cuda::asBf16(x), rows, cols, out);
}
