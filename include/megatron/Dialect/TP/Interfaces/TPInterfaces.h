//===- TPInterfaces.h - tp op interfaces ------------------------*- C++ -*-===//
//
// What an op tells the passes about itself: how its dimensions split
// (ShardingRuleOpInterface), its gradient (VJPOpInterface), its precision
// under bf16 (PrecisionOpInterface), what a collective moves
// (CollectiveOpInterface, StartOpInterface) and Megatron's region ops
// (MegatronRegionOpInterface). A library of its own below the dialect, as
// upstream's shard has: the tp ops implement these, and so do upstream ops
// through external models (lib/Dialect/TP/Extensions).
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_DIALECT_TP_INTERFACES_TPINTERFACES_H
#define MEGATRON_DIALECT_TP_INTERFACES_TPINTERFACES_H

#include "megatron/Dialect/TP/Interfaces/PrecisionRule.h"
#include "megatron/Dialect/TP/Interfaces/ShardingRule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"

#include "megatron/Dialect/TP/Interfaces/TPInterfacesEnums.h.inc"

namespace mlir::tp {
class PartitionContext;

/// Ring passes a collective of `kind` makes over its tensor: 2 for an
/// all-reduce (a reduce-scatter, then an all-gather), 1 for an all-gather
/// or a reduce-scatter, 0 for what moves nothing between ranks.
int64_t getRingPasses(CollectiveKind kind);
} // namespace mlir::tp

#include "megatron/Dialect/TP/Interfaces/TPInterfaces.h.inc"

#endif // MEGATRON_DIALECT_TP_INTERFACES_TPINTERFACES_H
