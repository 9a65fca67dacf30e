//===- CPUPipeline.cpp - per-rank tp program to the LLVM dialect ----------===//
#include "LoweringStages.h"

#include "megatron/Conversion/Passes.h"
#include "megatron/Lowering/Passes.h"
#include "megatron/Target/Passes.h"
#include "megatron/Target/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace {

/// The step's loops, run on the host, to the LLVM dialect.
void addHostLoopStages(OpPassManager &pm) {
  // f32 tanh and exp as polynomials: loops LLVM can vectorise, not a libm
  // call per element; what remains (f64 scalars) expands as upstream does.
  pm.addPass(megatron::createApproximateMath());
  pm.addPass(math::createMathExpandOpsPass());
  // bf16 rounding as integer code: LLVM would call __truncsfbf2, which
  // libgcc before GCC 13 lacks, and this rounds to nearest even as the
  // runtime's bf16 kernels do.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  megatron::addHostToLLVMStages(pm);
  pm.addPass(createReconcileUnrealizedCastsPass());
}

} // namespace

void megatron::buildCPULoweringPipeline(OpPassManager &pm, bool outlineLayers) {
  addBufferizedRuntimeStages(pm, outlineLayers, /*hostMemory=*/true);
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
  // The loops run on the threads the runtime's kernels use.
  pm.addPass(createParallelHostLoops());
  addHostLoopStages(pm);
}

void megatron::buildCUDAOnHostLoweringPipeline(OpPassManager &pm,
                                               bool outlineLayers) {
  addBufferizedRuntimeStages(pm, outlineLayers, /*hostMemory=*/true);
  pm.addPass(createOffloadToGPU());
  pm.addPass(createGPULaunchToHostLoops());
  // Tiling's index arithmetic (affine.apply), lowered in the kernels on GPUs.
  pm.addPass(createLowerAffinePass());
  addHostLoopStages(pm);
}
