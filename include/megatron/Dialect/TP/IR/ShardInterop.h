//===- ShardInterop.h - upstream's shard dialect in tp terms -----*- C++ -*-===//
//
// The one mapping between upstream's shard dialect and the tp dialect. A
// shard.grid of one axis is the mesh ["tp"], of two the mesh ["dp", "tp"];
// the axis order, and with it the grid axis index of each mesh axis, is
// kept. Reductions map by kind (tp has a sum and a maximum). The readers of
// shard programs (tp-import-shard, convert-shard-to-tp) and the writer
// (convert-tp-to-shard) all go through it.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_DIALECT_TP_IR_SHARDINTEROP_H
#define MEGATRON_DIALECT_TP_IR_SHARDINTEROP_H

#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <optional>

namespace mlir::tp {

/// Replaces each shard.grid of `module` with the tp.mesh of the same name
/// and axis sizes. A grid of more than two axes, or of a dynamic shape, is
/// an error at it.
LogicalResult importGrids(ModuleOp module);

/// The mesh `mesh` that `user` names (the verifier checked it exists).
MeshOp lookupMesh(Operation *user, FlatSymbolRefAttr mesh);

/// The name of grid axis `axis` of `mesh` (its position among the mesh's
/// axes), or null when the mesh has no such axis.
StringAttr getMeshAxisName(MeshOp mesh, shard::GridAxis axis);

/// The grid axis of mesh axis `axis` of `mesh` (present).
shard::GridAxis getGridAxis(MeshOp mesh, StringRef axis);

/// A tp reduction as shard's.
shard::ReductionKind toShardReduction(ReductionKind kind);
/// A shard reduction as tp's, or nullopt for those tp has not (product,
/// average, bitwise, generic).
std::optional<ReductionKind> fromShardReduction(shard::ReductionKind kind);

} // namespace mlir::tp

#endif // MEGATRON_DIALECT_TP_IR_SHARDINTEROP_H
