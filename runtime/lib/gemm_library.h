// Internal: which library runs the CPU's fp32 GEMMs (gemm.cpp chooses it),
// for mrt_gemm_engines' line.
#ifndef MEGATRON_RT_LIB_GEMM_LIBRARY_H
#define MEGATRON_RT_LIB_GEMM_LIBRARY_H

namespace mrt {

const char *fp32GemmLibrary();

} // namespace mrt

#endif // MEGATRON_RT_LIB_GEMM_LIBRARY_H
