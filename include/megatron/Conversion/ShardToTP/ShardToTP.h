//===- ShardToTP.h - upstream shard collectives as tp collectives -*- C++ -*-===//
//
// A program upstream's shard-partition made, read as a per-rank tp program
// (convert-shard-to-tp): one pattern per shard op. The patterns name each
// collective's mesh axis through the tp.mesh that the pass makes of the
// grid before they run.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_CONVERSION_SHARDTOTP_SHARDTOTP_H
#define MEGATRON_CONVERSION_SHARDTOTP_SHARDTOTP_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::megatron {

/// all_reduce, all_gather, reduce_scatter, all_slice, process_multi_index
/// and grid_shape to their tp counterparts.
void populateShardToTPPatterns(RewritePatternSet &patterns);

} // namespace mlir::megatron

#endif // MEGATRON_CONVERSION_SHARDTOTP_SHARDTOTP_H
