/* Shared declarations of the megatron-rt C ABI.
 *
 * Every kernel works on fp32, row-major, contiguous tensors unless a leading
 * dimension is passed; sizes are int64_t, token ids int32_t. Kernels do not
 * return errors: a violated contract that would silently give wrong numbers
 * (an index out of range, a size a library cannot represent) prints
 * "megatron-rt: ..." to stderr and aborts the process. */
#ifndef MEGATRON_RT_API_H
#define MEGATRON_RT_API_H

#include <stddef.h>
#include <stdint.h>

/* The library is built with hidden visibility; only MRT_API symbols form the
 * ABI that generated code links against. */
#define MRT_API __attribute__((visibility("default")))

#ifdef __cplusplus
#define MRT_EXTERN_C_BEGIN extern "C" {
#define MRT_EXTERN_C_END }
#else
#define MRT_EXTERN_C_BEGIN
#define MRT_EXTERN_C_END
#endif

#endif /* MEGATRON_RT_API_H */
