// __nv_bfloat16 for the CPU emulator: the storage type of the kernels'
// tensor-core operands and its two conversions, nothing else (anything more
// fails to compile, as in cuda_runtime.h).
#ifndef MEGATRON_RT_CUDA_EMULATOR_CUDA_BF16_H
#define MEGATRON_RT_CUDA_EMULATOR_CUDA_BF16_H

#include <cstdint>
#include <cstring>

// The top half of an IEEE float. No arithmetic operators: the kernels only
// convert; the tensor-core products do the arithmetic.
struct __nv_bfloat16 {
  uint16_t bits;
};

// Round to nearest, ties to even, as __float2bfloat16 does; a NaN stays a
// (quiet) NaN instead of rounding into infinity.
inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return {static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<uint16_t>(u >> 16)};
}

inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

#endif // MEGATRON_RT_CUDA_EMULATOR_CUDA_BF16_H
