//===- TP.h - tp dialect ----------------------------------------*- C++ -*-===//
#ifndef MEGATRON_DIALECT_TP_IR_TP_H
#define MEGATRON_DIALECT_TP_IR_TP_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "megatron/Dialect/TP/Interfaces/TPInterfaces.h"
#include "megatron/Dialect/TP/IR/TPOpsDialect.h.inc"
#include "megatron/Dialect/TP/IR/TPEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "megatron/Dialect/TP/IR/TPAttrs.h.inc"
#define GET_TYPEDEF_CLASSES
#include "megatron/Dialect/TP/IR/TPOpsTypes.h.inc"

namespace mlir::tp {

/// Resolves the mesh `mesh` an op at `op` names and its axis `axis`,
/// reporting either missing at `op`; returns the axis size.
FailureOr<int64_t> verifyMeshAxis(Operation *op, FlatSymbolRefAttr mesh,
                                  StringRef axis,
                                  SymbolTableCollection &symbolTable);

/// An op whose symbol uses are its mesh and axis (`getMeshAttr`,
/// `getAxis`) and nothing more to check against them.
template <typename ConcreteType>
class MeshAxisUser : public OpTrait::TraitBase<ConcreteType, MeshAxisUser> {
public:
  LogicalResult verifySymbolUses(SymbolTableCollection &symbolTable) {
    auto op = cast<ConcreteType>(this->getOperation());
    return verifyMeshAxis(op, op.getMeshAttr(), op.getAxis(), symbolTable);
  }
};

/// An op `--recompute=selective` recomputes (TPOps.td): a marker.
template <typename ConcreteType>
class SelectiveRecompute
    : public OpTrait::TraitBase<ConcreteType, SelectiveRecompute> {};
} // namespace mlir::tp

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

/// Megatron's vocabulary-parallel cross-entropy of `loss`, built at `b`'s
/// insertion point: the local max, its all-reduce over `axis`, the local
/// sums of exponentials and target logits, their all-reduces, and the loss.
/// Without an axis (unsplit logits) the same pieces without all-reduces.
/// `offset` is the first vocabulary row this rank holds; `meanOver`, set
/// where the tokens are split across ranks, the number of tokens of the
/// whole batch, which the loss's mean divides by.
struct CrossEntropyPieces {
  XentMaxOp max;
  XentSumExpOp sums;
  XentLossOp loss;
};
CrossEntropyPieces buildCrossEntropyPieces(OpBuilder &b, CrossEntropyOp loss,
                                           Value offset, FlatSymbolRefAttr mesh,
                                           std::optional<StringRef> axis,
                                           IntegerAttr meanOver = {});

/// What the runtime feeds a step argument, as its `tp.role` states (the
/// names are megatron_rt/contract.h's MGT_ROLE_*).
enum class ArgumentRole {
  Parameter, Tokens, Targets, Hyperparameters, Logits, AdamM, AdamV, Grad,
  /// The fp32 rows of a parameter stored in bf16 (tp-shard-master-weights).
  Master,
  /// A framework function's arguments and results (tp-function-entry).
  Input, Output,
  /// Generation: the new token of each sequence, where each sequence's
  /// chunk starts, the column whose logits are written, the KV cache.
  NextTokens, Positions, LastIndex, KVCache
};
struct ArgumentKind {
  ArgumentRole role;
  /// The parameter optimizer state or a gradient belongs to (`tp.param`).
  StringRef parameter;
};
/// The kind of argument `index` of `function`: its `tp.role` and `tp.param`;
/// an argument without a role is a parameter.
ArgumentKind getArgumentKind(FunctionOpInterface function, unsigned index);
/// `tp.role` (and `tp.param` when `parameter` is not empty) of an argument
/// of that kind.
SmallVector<NamedAttribute, 2> getArgumentKindAttrs(MLIRContext *context,
                                                    ArgumentRole role,
                                                    StringRef parameter = "");
/// Writes `tp.role` (and `tp.param` when `parameter` is not empty).
void setArgumentKind(FunctionOpInterface function, unsigned index,
                     ArgumentRole role, StringRef parameter = "");
StringRef stringifyArgumentRole(ArgumentRole role);
std::optional<ArgumentRole> symbolizeArgumentRole(StringRef name);

} // namespace mlir::tp

#endif // MEGATRON_DIALECT_TP_IR_TP_H
