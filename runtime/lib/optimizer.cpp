#include "megatron_rt/optimizer.h"
#include "isa.h"

// Squares summed in double, in 32 running sums: one vector of sums waits on
// its own previous add for every vector of elements (the add's latency). In
// the 124M step's profile (bench/cpu/profile_step.sh) it fell from 2.9 % of
// the samples to 2.4-2.7 %.
extern "C" MRT_VECTOR_KERNEL void
mrt_sum_squares_f32(const float *x, int64_t n, double *sums, int64_t slot) {
  constexpr int64_t kLanes = 32;
  const int64_t blocks = n / kLanes;
  double lanes[kLanes] = {};
#pragma omp parallel for reduction(+ : lanes[:kLanes]) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const float *block = x + b * kLanes;
#pragma omp simd
    for (int64_t j = 0; j < kLanes; ++j)
      lanes[j] += static_cast<double>(block[j]) * block[j];
  }
  double sum = 0.0;
  for (int64_t i = blocks * kLanes; i < n; ++i)
    sum += static_cast<double>(x[i]) * x[i];
  for (double lane : lanes)
    sum += lane;
  sums[slot] = sum;
}

extern "C" double mrt_sum_f64(const double *values, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum += values[i];
  return sum;
}
