//===- InitAll.h - register megatron-mlir with a host --------------*- C++ -*-===//
//
// What a tool or a framework embedding megatron-mlir in its own pipeline
// calls before it parses or runs anything: with these two a host reaches
// every stage, the lowering and the step library included.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_INITALL_H
#define MEGATRON_INITALL_H

#include "megatron/Analysis/Passes.h"
#include "megatron/Conversion/Passes.h"
#include "megatron/Dialect/TP/Extensions/ShardingRuleExtensions.h"
#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Lowering/Passes.h"
#include "megatron/Target/Passes.h"
#include "megatron/Target/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

namespace mlir::megatron {

/// The tp dialect, the sharding rules of the upstream ops frameworks lower
/// to, and every upstream dialect, interface model and extension the
/// pipeline goes through (bufferization needs the external models of
/// linalg, tensor and arith; the CUDA target, the NVVM and GPU translations
/// to LLVM IR).
inline void registerAllDialects(DialectRegistry &registry) {
  registry.insert<tp::TPDialect>();
  tp::registerShardingRuleExtensions(registry);
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates kernels to LLVM IR in-process.
  mlir::registerAllToLLVMIRTranslations(registry);
}

/// Every pass of the project and its pipelines: `megatron-pipeline` (plan
/// and partition), `megatron-compile-pipeline` (all of megatron-compile)
/// and the `megatron-lower-*` lowerings, for textual pipelines
/// (parsePassPipeline, mlirParsePassPipeline, megatron-opt).
inline void registerAllPasses() {
  registerPassesAndPipelines();
  registerMegatronAnalysisPasses();
  registerMegatronLoweringPasses();
  registerMegatronConversionPasses();
  registerMegatronTargetPasses();
  registerTargetPipelines();
}

} // namespace mlir::megatron

#endif // MEGATRON_INITALL_H
