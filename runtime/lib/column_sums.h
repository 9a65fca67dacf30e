// Internal: reductions over the rows of a matrix inside an OpenMP loop over
// rows. Each thread owns double partial sums, so there are no atomics, and
// summing thousands of rows keeps fp32-level accuracy.
#ifndef MEGATRON_RT_LIB_COLUMN_SUMS_H
#define MEGATRON_RT_LIB_COLUMN_SUMS_H

#include <omp.h>

#include <cstdint>
#include <vector>

namespace mrt {

class ColumnSums {
public:
  // `count` independent column vectors of length `cols` per thread.
  ColumnSums(int64_t count, int64_t cols)
      : count(count), cols(cols),
        partial(static_cast<size_t>(omp_get_max_threads() * count * cols),
                0.0) {}

  // The calling thread's partial sums of vector `which`; call inside the
  // parallel region.
  double *local(int64_t which) {
    return partial.data() + (omp_get_thread_num() * count + which) * cols;
  }

  // Sum over threads of column c of vector `which`; call after the region.
  double total(int64_t which, int64_t c) const {
    double sum = 0.0;
    for (size_t offset = which * cols + c; offset < partial.size();
         offset += count * cols)
      sum += partial[offset];
    return sum;
  }

private:
  int64_t count;
  int64_t cols;
  std::vector<double> partial;
};

} // namespace mrt

#endif // MEGATRON_RT_LIB_COLUMN_SUMS_H
