//===- CPUPipeline.cpp - per-rank tp program to the LLVM dialect ----------===//
#include "megatron/Conversion/Passes.h"
#include "megatron/Target/StepLibrary.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void megatron::buildCPULoweringPipeline(OpPassManager &pm) {
  pm.addPass(createConvertTPToRuntime());
  // Bias + GELU and bias + residual chains become single loops.
  pm.addPass(createLinalgElementwiseOpFusionPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // Updated parameters and optimizer state were written in place.
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createFinalizeRuntimeCalls());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // tanh as exp: a loop LLVM can vectorise, not a libm call per element.
  pm.addPass(math::createMathExpandOpsPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  FinalizeMemRefToLLVMConversionPassOptions memref;
  // Buffers come from the runtime's cache (megatron_rt/allocator.h), so each
  // step reuses the last one's memory.
  memref.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memref));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions func;
  // Static buffers cross the step's boundary as plain pointers.
  func.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(func));
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void megatron::registerCPULoweringPipeline() {
  PassPipelineRegistration<>(
      "megatron-lower-cpu",
      "Lower a partitioned tp program to the LLVM dialect for the CPU target",
      buildCPULoweringPipeline);
}
