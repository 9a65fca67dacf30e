// Internal: reporting of violated kernel contracts.
#ifndef MEGATRON_RT_LIB_FATAL_H
#define MEGATRON_RT_LIB_FATAL_H

#include <cstdint>

namespace mrt {

// Kernels have no error channel, and continuing would corrupt the training
// step silently, so a broken contract ends the process loudly.
[[noreturn]] void fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

// BLAS takes 32-bit sizes; a larger value would be truncated.
int checkedInt(int64_t value, const char *what);

} // namespace mrt

#endif // MEGATRON_RT_LIB_FATAL_H
