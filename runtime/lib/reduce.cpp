#include "megatron_rt/reduce.h"

#include "column_sums.h"
#include "isa.h"

extern "C" MRT_VECTOR_KERNEL void mrt_sum_rows_f32(const float *x, int64_t rows,
                                                   int64_t cols, float *out) {
  mrt::ColumnSums sums(1, cols);
#pragma omp parallel
  {
    double *local = sums.local(0);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        local[c] += x[r * cols + c];
  }
  for (int64_t c = 0; c < cols; ++c)
    out[c] = static_cast<float>(sums.total(0, c));
}
