#include "gelu.h"

#include "isa.h"

MRT_VECTOR_KERNEL void mrt::gelu(const float *x, float *y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = geluOf(x[i]);
}
