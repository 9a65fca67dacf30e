//===- CPUPipeline.cpp - per-rank tp program to the LLVM dialect ----------===//
#include "LoweringStages.h"

#include "megatron/Target/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void megatron::buildCPULoweringPipeline(OpPassManager &pm) {
  addBufferizedRuntimeStages(pm);
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // tanh as exp: a loop LLVM can vectorise, not a libm call per element.
  pm.addPass(math::createMathExpandOpsPass());
  addHostToLLVMStages(pm);
  pm.addPass(createReconcileUnrealizedCastsPass());
}
