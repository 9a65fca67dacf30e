// The bf16 rounding libcall of LLVM's x86 code generator, for the step .so.
//
// The host loops round f32 to bf16 with integer code (arith-expand), but
// where LLVM vectorises a bounds-guarded loop into masked bf16 stores, the
// scalarised stores round through __truncsfbf2. libgcc has it only from
// GCC 13, so Debian 12 does not: the runtime every CPU step links provides
// it. The psABI returns a __bf16 in the low 16 bits of %xmm0, which is
// where a float whose low half holds the bits lands (GCC 12 has no __bf16).
#include "bf16.h"

#include <cstring>

extern "C" MRT_API float __truncsfbf2(float value) {
  uint32_t bits = mrt::narrow(value);
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}
