//===- Pipelines.h - per-rank tp program to the LLVM dialect -----*- C++ -*-===//
//
// The lowering of a partitioned step for each target; both end in the LLVM
// dialect that emitStepLibrary (StepLibrary.h) turns into a shared object.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_TARGET_PIPELINES_H
#define MEGATRON_TARGET_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::megatron {

/// convert-tp-to-runtime through bufferization, deallocation and the
/// conversion to the LLVM dialect; loops run on the host.
void buildCPULoweringPipeline(OpPassManager &pm);

struct CUDAPipelineOptions : public PassPipelineOptions<CUDAPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("GPU architecture: sm_80 or sm_90"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> binaryFormat{
      *this, "binary-format",
      llvm::cl::desc("what gpu.binary holds: fatbin (cubin and PTX, what "
                     "the step loads) or isa (PTX text, to read)"),
      llvm::cl::init("fatbin")};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit with ptxas and libdevice (default: the "
                     "one found at configure time)"),
      llvm::cl::init("")};
};

/// The CPU pipeline's bufferized step, its loops offloaded as kernels
/// compiled through NVVM to a fatbin (cubin and PTX for `chip`) embedded in
/// the module; the host code launches them through the runtime's mgpu*
/// entry points.
void buildCUDALoweringPipeline(OpPassManager &pm,
                               const CUDAPipelineOptions &options);

/// The CUDA target's program, its kernels run as host loops over their grid
/// and blocks (megatron-gpu-launch-to-host-loops), against the CPU runtime:
/// the GPU lowering checked on a machine without a GPU.
void buildCUDAOnHostLoweringPipeline(OpPassManager &pm);

/// The architectures buildCUDALoweringPipeline compiles for.
bool isSupportedCUDAChip(StringRef chip);

/// Registers `megatron-lower-cpu`, `megatron-lower-cuda` and
/// `megatron-lower-cuda-on-host` for megatron-opt.
void registerLoweringPipelines();

} // namespace mlir::megatron

#endif // MEGATRON_TARGET_PIPELINES_H
