//===- CPUPipeline.cpp - per-rank tp program to the LLVM dialect ----------===//
#include "LoweringStages.h"

#include "megatron/Conversion/Passes.h"
#include "megatron/Target/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace {

/// The step's loops, run on the host, to the LLVM dialect.
void addHostLoopStages(OpPassManager &pm) {
  // tanh as exp: a loop LLVM can vectorise, not a libm call per element.
  pm.addPass(math::createMathExpandOpsPass());
  megatron::addHostToLLVMStages(pm);
  pm.addPass(createReconcileUnrealizedCastsPass());
}

} // namespace

void megatron::buildCPULoweringPipeline(OpPassManager &pm) {
  addBufferizedRuntimeStages(pm);
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  addHostLoopStages(pm);
}

void megatron::buildCUDAOnHostLoweringPipeline(OpPassManager &pm) {
  addBufferizedRuntimeStages(pm);
  pm.addPass(createOffloadToGPU());
  pm.addPass(createGPULaunchToHostLoops());
  // Tiling's index arithmetic (affine.apply), lowered in the kernels on GPUs.
  pm.addPass(createLowerAffinePass());
  addHostLoopStages(pm);
}
