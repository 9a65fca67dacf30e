//===- ArithShardingRules.cpp - how constants may be split ----------------===//
#include "megatron/Dialect/TP/Extensions/ShardingRuleExtensions.h"
#include "megatron/Dialect/TP/IR/ShardingUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::tp;

namespace {

/// A splat is the same value at any shape, so each rank may hold its share;
/// any other tensor constant stays whole (a rank would need its own slice of
/// the data).
struct ConstantShardingRule
    : ShardingRuleOpInterface::ExternalModel<ConstantShardingRule,
                                             arith::ConstantOp> {
  ShardingRule getShardingRule(Operation *op) const {
    auto constant = cast<arith::ConstantOp>(op);
    ShardingRule rule;
    auto type = dyn_cast<RankedTensorType>(constant.getType());
    if (!type) {
      rule.results = {{}};
      return rule;
    }
    if (isa<SplatElementsAttr>(constant.getValue()))
      rule.results = {rule.addFactors(type.getRank())};
    else
      rule.results = {ShardingRule::TensorDims(type.getRank())};
    return rule;
  }

  /// The splat at the local shape.
  LogicalResult partition(Operation *op, PartitionContext &) const {
    auto constant = cast<arith::ConstantOp>(op);
    auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
    if (!splat || splat.getType() == constant.getType())
      return success();
    constant.setValueAttr(DenseElementsAttr::get(
        cast<ShapedType>(constant.getType()), splat.getSplatValue<Attribute>()));
    return success();
  }
};

} // namespace

void tp::registerArithShardingRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, arith::ArithDialect *) {
    arith::ConstantOp::attachInterface<ConstantShardingRule>(*context);
  });
}
