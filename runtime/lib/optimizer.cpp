#include "megatron_rt/optimizer.h"
#include "isa.h"

extern "C" MRT_VECTOR_KERNEL void
mrt_sum_squares_f32(const float *x, int64_t n, double *sums, int64_t slot) {
  double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(x[i]) * x[i];
  sums[slot] = sum;
}

extern "C" double mrt_sum_f64(const double *values, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum += values[i];
  return sum;
}
