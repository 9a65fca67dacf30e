//===- Passes.h - megatron-mlir passes --------------------------*- C++ -*-===//
#ifndef MEGATRON_TRANSFORMS_PASSES_H
#define MEGATRON_TRANSFORMS_PASSES_H

#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::megatron {

#define GEN_PASS_DECL
#include "megatron/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megatron/Transforms/Passes.h.inc"

struct PipelineOptions : public PassPipelineOptions<PipelineOptions> {
  Option<int64_t> tp{*this, "tp", llvm::cl::desc("tensor-parallel size"),
                     llvm::cl::init(1)};
  Option<int64_t> dp{*this, "dp",
                     llvm::cl::desc("data-parallel size (splits the batch)"),
                     llvm::cl::init(1)};
  Option<bool> exportLogits{
      *this, "export-logits",
      llvm::cl::desc("also write the logits into a `logits` argument"),
      llvm::cl::init(false)};
};

/// tp-megatron-annotate, tp-propagate, tp-insert-conjugates,
/// (tp-export-logits,) tp-partition.
void buildMegatronPipeline(OpPassManager &pm, const PipelineOptions &options);

/// Registers every pass of the project and the `megatron-pipeline`.
void registerPassesAndPipelines();

} // namespace mlir::megatron

#endif // MEGATRON_TRANSFORMS_PASSES_H
