//===- CUDAPipeline.cpp - per-rank tp program to kernels and host code ----===//
#include "LoweringStages.h"

#include "megatron/Conversion/Passes.h"
#include "megatron/Target/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/OptimizeForNVVM.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"

using namespace mlir;

bool megatron::isSupportedCUDAChip(StringRef chip) {
  return chip == "sm_80" || chip == "sm_90";
}

std::optional<std::string>
megatron::cudaOptionsProblem(const CUDAPipelineOptions &options) {
  if (!isSupportedCUDAChip(options.chip))
    return "unsupported arch '" + options.chip.getValue() +
           "'; use sm_80 or sm_90";
  if (options.binaryFormat != "fatbin" && options.binaryFormat != "isa")
    return "unknown binary-format '" + options.binaryFormat.getValue() +
           "'; use fatbin or isa";
  if (!options.toolkit.empty() &&
      !llvm::sys::fs::is_directory(options.toolkit.getValue()))
    return "toolkit '" + options.toolkit.getValue() + "' is not a directory";
  return std::nullopt;
}

namespace {

/// The toolkit found when megatron-mlir was configured; empty leaves the
/// search (CUDA_HOME, PATH) to MLIR.
StringRef defaultCUDAToolkit() {
#ifdef MEGATRON_CUDA_TOOLKIT_DIR
  return MEGATRON_CUDA_TOOLKIT_DIR;
#else
  return "";
#endif
}

void addKernelStages(OpPassManager &pm, StringRef chip) {
  // A kernel reads a view with a dynamic offset (a micro-batch's rows)
  // through the view's base buffer: a bare-pointer kernel argument cannot
  // carry the offset.
  pm.addPass(memref::createFoldMemRefAliasOpsPass());
  // Tiling, and that folding, left affine.min/apply index arithmetic in the
  // loop bodies.
  pm.addPass(createLowerAffinePass());
  // Loop bounds become kernel constants instead of kernel arguments.
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = chip.str();
  // sm_90's instructions need PTX ISA 8.0; CUDA 13's ptxas reads it for
  // sm_80 as well.
  target.features = "+ptx80";
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  // Kernel arguments are the buffers' pointers, not memref descriptors.
  nvvm.useBarePtrCallConv = true;
  kernels.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  kernels.addPass(createConvertIndexToLLVMPass());
  kernels.addPass(createArithToLLVMConversionPass());
  kernels.addPass(LLVM::createNVVMOptimizeForTargetPass());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
}

} // namespace

void megatron::buildCUDALoweringPipeline(OpPassManager &pm,
                                         const CUDAPipelineOptions &options) {
  addBufferizedRuntimeStages(pm, options.outlineLayers, /*hostMemory=*/false);
  pm.addPass(createOffloadToGPU());
  addKernelStages(pm, options.chip);
  addHostToLLVMStages(pm);
  GpuToLLVMConversionPassOptions launches;
  launches.kernelBarePtrCallConv = true;
  pm.addPass(createGpuToLLVMConversionPass(launches));
  // Fatbin: the cubin for the chip and its PTX, which newer GPUs JIT.
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.binaryFormat;
  binary.toolkitPath = options.toolkit.empty()
                           ? std::string(defaultCUDAToolkit())
                           : options.toolkit.getValue();
  pm.addPass(createGpuModuleToBinaryPass(binary));
  pm.addPass(createReconcileUnrealizedCastsPass());
}
