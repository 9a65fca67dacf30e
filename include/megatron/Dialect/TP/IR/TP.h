//===- TP.h - tp dialect ----------------------------------------*- C++ -*-===//
#ifndef MEGATRON_DIALECT_TP_IR_TP_H
#define MEGATRON_DIALECT_TP_IR_TP_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "megatron/Dialect/TP/IR/ShardingRule.h"
#include "megatron/Dialect/TP/IR/TPOpsDialect.h.inc"
#include "megatron/Dialect/TP/IR/TPEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "megatron/Dialect/TP/IR/TPAttrs.h.inc"

#include "megatron/Dialect/TP/IR/TPInterfaces.h.inc"

#define GET_OP_CLASSES
#include "megatron/Dialect/TP/IR/TPOps.h.inc"

namespace mlir::tp {

/// Checks `sharding` against the mesh it names and the shape of `type`:
/// the mesh and every axis exist, there is one entry per dimension, and each
/// split dimension is divisible by the product of its axes' sizes. Errors are
/// reported at `anchor`.
LogicalResult verifyShardingForType(Operation *anchor, ShardingAttr sharding,
                                    Type type,
                                    SymbolTableCollection &symbolTable);

/// Per-rank shape of a `globalShape` tensor laid out as `sharding` on `mesh`
/// (partial sums keep their shape). The sharding must have been verified.
SmallVector<int64_t> getLocalShape(ArrayRef<int64_t> globalShape,
                                   ShardingAttr sharding, MeshOp mesh);

/// The training-step phase `op` belongs to: "forward", "backward" or
/// "optimizer" (tp.phase).
StringRef getPhase(Operation *op);
/// Marks the ops from `first` up to (not including) `end` with `phase`.
void markPhase(Operation *first, Operation *end, StringRef phase);

/// What a step argument named `tp.name` is. tp-optimizer names optimizer
/// state and exported gradients "<param>.exp_avg", "<param>.exp_avg_sq" and
/// "<param>.grad"; the model's inputs and outputs have fixed names.
enum class ArgumentRole {
  Parameter, InputIds, Targets, Hyperparameters, Logits, AdamM, AdamV, Grad
};
struct ArgumentKind {
  ArgumentRole role;
  /// The parameter optimizer state or a gradient belongs to.
  StringRef parameter;
};
ArgumentKind classifyArgument(StringRef name);
StringRef stringifyArgumentRole(ArgumentRole role);

} // namespace mlir::tp

#endif // MEGATRON_DIALECT_TP_IR_TP_H
