/* The machine's fp32 multiply-add peak on every OpenMP thread: independent
 * chains of vector FMAs, as many as the registers hold, so that neither
 * latency nor memory limits the rate. bench/cpu/gemm_ceiling.py compiles it
 * (cc -O3 -march=native -fopenmp) and rates the GEMMs against it: how much
 * a better GEMM kernel could still gain over the libraries. */
#include <omp.h>
#include <stdint.h>

#if defined(__AVX512F__)
#define VECTOR_BYTES 64
#define CHAINS 24 /* of 32 zmm registers */
#else
#define VECTOR_BYTES 32
#define CHAINS 12 /* of 16 ymm registers */
#endif

typedef float vector __attribute__((vector_size(VECTOR_BYTES)));

/* Runs `iterations` rounds on every thread; returns the FLOPs done. */
double fma_peak(int64_t iterations) {
  int threads = 1;
#pragma omp parallel
  {
#pragma omp single
    threads = omp_get_num_threads();
    vector acc[CHAINS], x, y;
    for (int i = 0; i < VECTOR_BYTES / 4; ++i) {
      x[i] = 1.0000001f;
      y[i] = 0.999999f;
    }
    for (int c = 0; c < CHAINS; ++c)
      acc[c] = y * (float)c;
    for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
      for (int c = 0; c < CHAINS; ++c)
        acc[c] = acc[c] * x + y;
    }
    /* Keeps the chains live without a store in the loop. */
    float sum = 0.0f;
    for (int c = 0; c < CHAINS; ++c)
      for (int i = 0; i < VECTOR_BYTES / 4; ++i)
        sum += acc[c][i];
    __asm__ volatile("" : : "x"(sum));
  }
  return 2.0 * threads * (double)iterations * CHAINS * (VECTOR_BYTES / 4);
}
