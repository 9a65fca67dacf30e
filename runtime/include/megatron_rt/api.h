/* Shared declarations of the megatron-rt C ABI.
 *
 * Every kernel works on fp32, row-major, contiguous tensors unless a leading
 * dimension is passed; sizes are int64_t, token ids int32_t. The `_bf16`
 * variants serve bf16 mixed precision: activations, their gradients and the
 * bf16 copies of the parameters are mrt_bf16, while statistics (layer-norm
 * mean and rstd, attention log-sum-exps, cross-entropy maxima and sums) and
 * parameter gradients stay fp32. They compute in fp32 and round each bf16
 * they store to nearest even. Kernels do not
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

/* A bfloat16 as its bits: the upper half of the fp32 with the same sign,
 * exponent and leading 7 mantissa bits. */
typedef uint16_t mrt_bf16;

/* `value` rounded to bf16, to nearest with ties to even; a NaN stays a
 * (quiet) NaN instead of rounding into infinity. The one rounding of the
 * runtime's kernels and of the launcher, which stores parameters kept in
 * bf16. */
static inline mrt_bf16 mrt_bf16_round(float value) {
  uint32_t bits;
  __builtin_memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return (mrt_bf16)((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (mrt_bf16)(bits >> 16);
}

#endif /* MEGATRON_RT_API_H */
