//===- Passes.h - tp planning and training passes --------------*- C++ -*-===//
#ifndef MEGATRON_DIALECT_TP_TRANSFORMS_PASSES_H
#define MEGATRON_DIALECT_TP_TRANSFORMS_PASSES_H

#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::megatron {

#define GEN_PASS_DECL
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"

/// The mesh axis of micro-batches: tp-megatron-annotate splits each dp
/// rank's rows over it so that the program is planned and differentiated as
/// if micro-batches were ranks, and tp-micro-batches turns it into a loop.
/// It never reaches the runtime.
inline constexpr llvm::StringLiteral kMicroBatchAxisName = "mb";

/// The layout of a program over ranks, which megatron-pipeline and
/// megatron-compile-pipeline both take (and megatron-compile as flags):
/// declared once, in LayoutOptions.def, so none can disagree on a name or a
/// default.
template <typename Derived>
struct LayoutOptions : public PassPipelineOptions<Derived> {
  template <typename T>
  using Option = typename PassPipelineOptions<Derived>::template Option<T>;

#define MEGATRON_OPTION(GROUP, TYPE, MEMBER, FLAG, ...)                       \
  Option<TYPE> MEMBER{*this, FLAG, __VA_ARGS__};
#include "megatron/Dialect/TP/Transforms/LayoutOptions.def"
#undef MEGATRON_OPTION

  MegatronAnnotateOptions annotateOptions() const {
    return MegatronAnnotateOptions{tp, dp, microBatches, sequenceParallel};
  }
};

struct PipelineOptions : public LayoutOptions<PipelineOptions> {};

/// tp-megatron-annotate, tp-propagate, tp-insert-conjugates,
/// (tp-export-logits,) tp-partition.
void buildMegatronPipeline(OpPassManager &pm,
                           const MegatronAnnotateOptions &layout,
                           bool exportLogits);

/// tp-propagate, tp-insert-conjugates, (tp-export-logits,) tp-partition: a
/// program partitioned from the shardings already on it, by the planner
/// (tp-megatron-annotate) or by a framework (`tp.sharding` arguments).
void buildPartitionPipeline(OpPassManager &pm, bool exportLogits);

/// Registers the planning and training passes, `megatron-pipeline` and
/// `megatron-partition-pipeline`.
void registerPassesAndPipelines();

} // namespace mlir::megatron

#endif // MEGATRON_DIALECT_TP_TRANSFORMS_PASSES_H
