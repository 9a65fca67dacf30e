//===- LoweringStages.cpp - the stages both targets share -----------------===//
#include "LoweringStages.h"

#include "megatron/Analysis/Passes.h"
#include "megatron/Conversion/Passes.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Lowering/Passes.h"
#include "megatron/Target/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"

using namespace mlir;

void megatron::addBufferizedRuntimeStages(OpPassManager &pm,
                                          bool outlineLayers, bool hostMemory) {
  // Fused before the outlining, which would cut between a layer's closing
  // residual add and the next layer's opening norm.
  pm.addPass(createFuseResidualNorm());
  // Each distinct layer body compiled once, and called in a loop over the
  // stacked layers: the step's code does not grow with the depth.
  if (outlineLayers) {
    pm.addPass(createStackLayerArguments());
    pm.addPass(createOutlineLayers());
    pm.addPass(createRollLayers());
  }
  pm.addPass(createConvertTPToRuntime());
  // What the runtime calls left elementwise becomes as few loops (kernels)
  // as it can.
  pm.addPass(createFuseElementwise());
  // What a layer writes into a stack's slot (a saved activation, a
  // gradient) is computed there, not computed elsewhere and copied in.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  // A loop over the layers carries each layer's output, a new buffer, to
  // the next.
  bufferize.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // Updated parameters and optimizer state were written in place: by the
  // callees, whose results are then their operands, and by the loops over
  // the layers, whose results are then their initial buffers.
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  pm.addNestedPass<func::FuncOp>(createLoopResultsInPlace());
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  // An outlined layer's results (its output, the activations it saves)
  // become buffers the caller allocates and the layer writes: deallocation
  // then knows them apart and frees each one without a run-time alias check.
  // Entries return no buffers, so their signatures stay.
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  bufferization::buildBufferDeallocationPipeline(pm);
  // Which frees at the end of each block: the step's one block would keep
  // every buffer until it returns.
  pm.addNestedPass<func::FuncOp>(createDeallocAtLastUse());
  // A saved activation or a gradient is computed in its stack's slot, not
  // beside it and copied in.
  pm.addPass(createElideCopies());
  pm.addPass(createFinalizeRuntimeCalls());
  pm.addNestedPass<func::FuncOp>(createCopiesToLinalg({hostMemory}));
  // With every free at its buffer's last use, the lifetimes are known: one
  // allocation per function call instead of one per buffer.
  pm.addNestedPass<func::FuncOp>(createPlanBuffers());
}

void megatron::addHostToLLVMStages(OpPassManager &pm) {
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  // The offsets of subviews (a micro-batch's rows) come out as affine.apply.
  pm.addPass(createLowerAffinePass());
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
}
