// Internal: GEMMs on oneDNN's matmul primitive.
//
// The bf16 GEMMs run here: bf16 operands and fp32 accumulation on the CPU's
// bf16 instructions (AMX tiles, AVX-512-BF16 dot products), C rounded once
// to its type, as cuBLASLt computes them on the GPU. A primitive is built
// (oneDNN JIT-compiles its kernel) the first time a problem is seen and
// kept for the process: a training step asks the same few dozen problems
// on every step.
#ifndef MEGATRON_RT_LIB_ONEDNN_MATMUL_H
#define MEGATRON_RT_LIB_ONEDNN_MATMUL_H

#include <cstdint>
#include <string>
#include <tuple>

namespace mrt {

enum class GemmType { F32, BF16 };

/// One GEMM as megatron_rt/gemm.h states it, row-major with leading
/// dimensions: C = alpha op(A) op(B) + beta C, or, with a bias (alpha 1,
/// beta 0), C = op(A) op(B) + bias with the [N] bias on every row, summed
/// in fp32 before C's rounding.
struct MatmulProblem {
  int transA = 0, transB = 0;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  GemmType operands = GemmType::BF16; // A, B and the bias
  GemmType result = GemmType::BF16;   // C
  bool bias = false;
  float alpha = 1.0f, beta = 0.0f;

  auto key() const {
    return std::tie(transA, transB, M, N, K, lda, ldb, ldc, operands, result,
                    bias, alpha, beta);
  }
  bool operator<(const MatmulProblem &other) const {
    return key() < other.key();
  }
};

/// Runs `problem` on oneDNN; ends the process (mrt::fatal) if oneDNN cannot.
void oneDNNMatmul(const MatmulProblem &problem, const void *A, const void *B,
                  const void *bias, void *C);

/// What oneDNN runs bf16 GEMMs with on this CPU: its kernel's name ("brg:
/// avx512_core_amx", "brg:avx512_core_bf16", "gemm:jit" where it converts
/// bf16 in software), or "" where it has none (reason then says why).
/// Decided once per process, under ONEDNN_MAX_CPU_ISA where that is set.
struct Bf16MatmulSupport {
  std::string kernel, reason;
  bool available() const { return !kernel.empty(); }
  // The kernel multiplies on AMX's tiles (the matrix units).
  bool matrixUnits() const;
  // The kernel has bf16 instructions (AMX or AVX-512-BF16), not a
  // conversion to fp32 in software.
  bool nativeBf16() const;
};
const Bf16MatmulSupport &bf16MatmulSupport();

} // namespace mrt

#endif // MEGATRON_RT_LIB_ONEDNN_MATMUL_H
