//===- BufferizationShardingRules.cpp - how writes into outputs split -----===//
#include "megatron/Dialect/TP/Extensions/ShardingRuleExtensions.h"
#include "megatron/Dialect/TP/IR/ShardingUtils.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"

using namespace mlir;
using namespace mlir::tp;

namespace {

/// A write of a value into an output argument (a step's results, the
/// exported logits) copies element by element: the output is laid out as
/// the value, each rank writing its share.
struct MaterializeInDestinationShardingRule
    : ShardingRuleOpInterface::ExternalModel<
          MaterializeInDestinationShardingRule,
          bufferization::MaterializeInDestinationOp> {
  ShardingRule getShardingRule(Operation *op) const {
    auto write = cast<bufferization::MaterializeInDestinationOp>(op);
    auto type = cast<RankedTensorType>(write.getSource().getType());
    ShardingRule rule = ShardingRule::elementwise(2, type.getRank());
    if (op->getNumResults() == 0)
      rule.results.clear();
    return rule;
  }
};

} // namespace

void tp::registerBufferizationShardingRules(DialectRegistry &registry) {
  registry.addExtension(
      +[](MLIRContext *context, bufferization::BufferizationDialect *) {
        bufferization::MaterializeInDestinationOp::attachInterface<
            MaterializeInDestinationShardingRule>(*context);
      });
}
