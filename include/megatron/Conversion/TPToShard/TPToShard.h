//===- TPToShard.h - tp collectives as upstream shard collectives -*- C++ -*-===//
//
// A partitioned program's tp collectives rewritten as upstream shard
// collectives, one pattern per tp op (convert-tp-to-shard). The patterns
// find each collective's grid axis through its tp.mesh, which the pass turns
// into a shard.grid once they have run.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_CONVERSION_TPTOSHARD_TPTOSHARD_H
#define MEGATRON_CONVERSION_TPTOSHARD_TPTOSHARD_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::megatron {

/// f, g, all_reduce, all_reduce_bucket, all_reduce_start and its wait,
/// all_gather, reduce_scatter,
/// local_slice and axis_index to their shard counterparts.
void populateTPToShardPatterns(RewritePatternSet &patterns);

} // namespace mlir::megatron

#endif // MEGATRON_CONVERSION_TPTOSHARD_TPTOSHARD_H
