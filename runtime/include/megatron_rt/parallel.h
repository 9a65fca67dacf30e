/* The generated code's loops on the runtime's threads. */
#ifndef MEGATRON_RT_PARALLEL_H
#define MEGATRON_RT_PARALLEL_H

#include "megatron_rt/api.h"

MRT_EXTERN_C_BEGIN

/* One part of a loop: its iterations [begin, end), with the values the loop
 * reads from its function (captures, laid out as the compiler chose). */
typedef void (*mrt_loop_body)(void *captures, int64_t begin, int64_t end);

/* Runs the n iterations of a loop whose iterations are independent (the
 * megatron-parallel-host-loops pass's output), one contiguous part per
 * OpenMP thread: the threads the GEMMs and the runtime's kernels use, so that
 * no other pool spins beside them. With one thread, body(captures, 0, n). */
MRT_API void mrt_parallel_for(mrt_loop_body body, void *captures, int64_t n);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_PARALLEL_H */
