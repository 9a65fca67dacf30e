// GELU, tanh form (megatron_rt/contract.h's constants): the epilogue of the
// CPU runtime's fused GEMM + bias + GELU. Elementwise GELU and its gradient
// elsewhere are generated code.
#ifndef MEGATRON_RT_LIB_GELU_H
#define MEGATRON_RT_LIB_GELU_H

#include <cstdint>

namespace mrt {

// y[i] = gelu(x[i]) for i < n; y may alias x.
void gelu(const float *x, float *y, int64_t n);

} // namespace mrt

#endif // MEGATRON_RT_LIB_GELU_H
