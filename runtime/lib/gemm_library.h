// Internal: which library runs the CPU's fp32 GEMMs (gemm.cpp chooses it),
// for mrt_gemm_engines and mrt_gemm_error.
#ifndef MEGATRON_RT_LIB_GEMM_LIBRARY_H
#define MEGATRON_RT_LIB_GEMM_LIBRARY_H

#include <string>

namespace mrt {

const char *fp32GemmLibrary();
// Why no fp32 GEMM can run (a bad MRT_GEMM), or "".
const std::string &fp32GemmError();

} // namespace mrt

#endif // MEGATRON_RT_LIB_GEMM_LIBRARY_H
