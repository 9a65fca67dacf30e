//===- ShardingRuleExtensions.h - rules for upstream ops --------*- C++ -*-===//
//
// ShardingRuleOpInterface models for the upstream ops frameworks lower to
// (linalg on tensors, tensor reshapes and slices, constants, writes into
// outputs), so that the
// planner that partitions tp programs partitions their programs too: the
// same factors, the same propagation, the same partitioning pass.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_DIALECT_TP_EXTENSIONS_SHARDINGRULEEXTENSIONS_H
#define MEGATRON_DIALECT_TP_EXTENSIONS_SHARDINGRULEEXTENSIONS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::tp {

/// Every linalg structured op: factors from its indexing maps and iterator
/// types.
void registerLinalgShardingRules(DialectRegistry &registry);
/// tensor.empty, expand_shape, collapse_shape, extract_slice and pad.
void registerTensorShardingRules(DialectRegistry &registry);
/// arith.constant.
void registerArithShardingRules(DialectRegistry &registry);
/// bufferization.materialize_in_destination (a write into an output).
void registerBufferizationShardingRules(DialectRegistry &registry);

inline void registerShardingRuleExtensions(DialectRegistry &registry) {
  registerLinalgShardingRules(registry);
  registerTensorShardingRules(registry);
  registerArithShardingRules(registry);
  registerBufferizationShardingRules(registry);
}

} // namespace mlir::tp

#endif // MEGATRON_DIALECT_TP_EXTENSIONS_SHARDINGRULEEXTENSIONS_H
