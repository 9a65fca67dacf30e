// Internal: small vector loops shared by the kernels. `omp simd` lets the
// compiler reorder the float reductions (vectorise) without -ffast-math.
#ifndef MEGATRON_RT_LIB_VEC_H
#define MEGATRON_RT_LIB_VEC_H

#include <cmath>
#include <cstdint>

namespace mrt {

inline float dot(const float *a, const float *b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
}

// y += a * x
inline void axpy(float a, const float *x, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] += a * x[i];
}

inline void scale(float *x, int64_t n, float s) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    x[i] *= s;
}

inline float maxOf(const float *x, int64_t n) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i)
    m = x[i] > m ? x[i] : m;
  return m;
}

} // namespace mrt

#endif // MEGATRON_RT_LIB_VEC_H
