#include "megatron_rt/parallel.h"

#include <omp.h>

extern "C" void mrt_parallel_for(mrt_loop_body body, void *captures,
                                 int64_t n) {
  if (omp_get_max_threads() == 1 || n < 2)
    return body(captures, 0, n);
#pragma omp parallel
  {
    int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    int64_t begin = n * thread / threads, end = n * (thread + 1) / threads;
    if (begin < end)
      body(captures, begin, end);
  }
}
