//===- TensorShardingRules.cpp - how tensor's shape ops may be split ------===//
//
// The tensor ops framework lowerings build shapes with: empty tensors (the
// inits of linalg ops), reshapes, slices and pads. A reshape splits in contiguous
// blocks, so a split of a merged dimension is a split of the outermost of
// its parts longer than 1; a slice may be split along the dimensions it
// takes whole.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/Extensions/ShardingRuleExtensions.h"
#include "megatron/Dialect/TP/IR/ShardingUtils.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::tp;

namespace {

using Dims = ShardingRule::TensorDims;
constexpr int64_t kWhole = ShardingRule::kWhole;

/// Index operands (dynamic sizes, offsets) have no dimensions.
void addIndexOperands(ShardingRule &rule, unsigned count) {
  rule.operands.append(count, Dims{});
}

struct EmptyShardingRule
    : ShardingRuleOpInterface::ExternalModel<EmptyShardingRule,
                                             tensor::EmptyOp> {
  ShardingRule getShardingRule(Operation *op) const {
    auto empty = cast<tensor::EmptyOp>(op);
    ShardingRule rule;
    Dims result;
    // A dynamic size is an operand that would need its local value.
    for (int64_t size : empty.getType().getShape())
      result.push_back(
          {ShapedType::isDynamic(size) ? kWhole : rule.addFactor(), 1});
    addIndexOperands(rule, op->getNumOperands());
    rule.results = {result};
    return rule;
  }
};

/// Fills `mergedDims` and `partDims` for a reshape whose `groups` send each
/// dimension of `merged` to dimensions of `parts`: the merged dimension
/// shares its factor with the outermost part longer than 1 (a block split of
/// the merged dimension is a block split of that part, the inner parts
/// whole); dynamic dimensions stay whole.
void reshapeDims(RankedTensorType merged, RankedTensorType parts,
                 ArrayRef<ReassociationIndices> groups, ShardingRule &rule,
                 Dims &mergedDims, Dims &partDims) {
  partDims.assign(parts.getRank(), {kWhole, 1});
  for (auto [dim, group] : llvm::enumerate(groups)) {
    const int64_t *outer = llvm::find_if(
        group, [&](int64_t part) { return parts.getDimSize(part) != 1; });
    if (outer == group.end() || merged.isDynamicDim(dim) ||
        llvm::any_of(group,
                     [&](int64_t part) { return parts.isDynamicDim(part); })) {
      mergedDims.push_back({kWhole, 1});
      continue;
    }
    int64_t factor = rule.addFactor();
    mergedDims.push_back({factor, 1});
    partDims[*outer] = {factor, 1};
  }
}

/// expand_shape and collapse_shape: the merged side is the source of an
/// expand and the result of a collapse.
template <typename ReshapeOp>
struct ReshapeShardingRule
    : ShardingRuleOpInterface::ExternalModel<ReshapeShardingRule<ReshapeOp>,
                                             ReshapeOp> {
  static constexpr bool kExpands =
      std::is_same_v<ReshapeOp, tensor::ExpandShapeOp>;

  ShardingRule getShardingRule(Operation *op) const {
    auto reshape = cast<ReshapeOp>(op);
    ShardingRule rule;
    Dims source, result;
    if constexpr (kExpands)
      reshapeDims(reshape.getSrcType(), reshape.getResultType(),
                  reshape.getReassociationIndices(), rule, source, result);
    else
      reshapeDims(reshape.getResultType(), reshape.getSrcType(),
                  reshape.getReassociationIndices(), rule, result, source);
    rule.operands = {source};
    // An expand's dynamic output sizes.
    addIndexOperands(rule, op->getNumOperands() - 1);
    rule.results = {result};
    return rule;
  }

  /// An expand's static output shape is the local one; a collapse infers
  /// its own.
  LogicalResult partition(Operation *op, PartitionContext &context) const {
    if constexpr (kExpands) {
      auto expand = cast<tensor::ExpandShapeOp>(op);
      expand.setStaticOutputShapeAttr(
          context.getBuilder().getDenseI64ArrayAttr(
              expand.getResultType().getShape()));
    }
    return success();
  }
};

/// Whether `slice` takes dimension `dim` of its source whole.
bool takesWhole(tensor::ExtractSliceOp slice, unsigned dim,
                int64_t sourceSize) {
  return slice.getStaticOffsets()[dim] == 0 &&
         slice.getStaticStrides()[dim] == 1 &&
         slice.getStaticSizes()[dim] == sourceSize &&
         !ShapedType::isDynamic(sourceSize);
}

struct ExtractSliceShardingRule
    : ShardingRuleOpInterface::ExternalModel<ExtractSliceShardingRule,
                                             tensor::ExtractSliceOp> {
  ShardingRule getShardingRule(Operation *op) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    RankedTensorType source = slice.getSourceType();
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    ShardingRule rule;
    Dims sourceDims, resultDims;
    for (unsigned dim = 0, e = source.getRank(); dim < e; ++dim) {
      int64_t factor = takesWhole(slice, dim, source.getDimSize(dim))
                           ? rule.addFactor()
                           : kWhole;
      sourceDims.push_back({factor, 1});
      if (!dropped.test(dim))
        resultDims.push_back({factor, 1});
    }
    rule.operands = {sourceDims};
    addIndexOperands(rule, op->getNumOperands() - 1);
    rule.results = {resultDims};
    return rule;
  }

  /// A dimension taken whole and split is taken whole locally.
  LogicalResult partition(Operation *op, PartitionContext &context) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    RankedTensorType source = slice.getSourceType();
    ShardingAttr sharding = context.shardingOf(slice.getSource());
    SmallVector<int64_t> sizes(slice.getStaticSizes());
    for (unsigned dim = 0, e = source.getRank(); dim < e; ++dim) {
      int64_t shards = context.shardCount(sharding, dim);
      int64_t local = source.getDimSize(dim);
      if (shards > 1 && takesWhole(slice, dim, local * shards))
        sizes[dim] = local;
    }
    slice.setStaticSizes(sizes);
    return success();
  }
};

/// A pad (the gradient of a slice) may be split along the dimensions it
/// does not pad.
struct PadShardingRule
    : ShardingRuleOpInterface::ExternalModel<PadShardingRule, tensor::PadOp> {
  ShardingRule getShardingRule(Operation *op) const {
    auto pad = cast<tensor::PadOp>(op);
    ShardingRule rule;
    Dims dims;
    for (auto [low, high] :
         llvm::zip(pad.getStaticLow(), pad.getStaticHigh()))
      dims.push_back({low == 0 && high == 0 ? rule.addFactor() : kWhole, 1});
    rule.operands = {dims};
    addIndexOperands(rule, op->getNumOperands() - 1);
    rule.results = {dims};
    return rule;
  }
};

} // namespace

void tp::registerTensorShardingRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, tensor::TensorDialect *) {
    tensor::EmptyOp::attachInterface<EmptyShardingRule>(*context);
    tensor::ExpandShapeOp::attachInterface<
        ReshapeShardingRule<tensor::ExpandShapeOp>>(*context);
    tensor::CollapseShapeOp::attachInterface<
        ReshapeShardingRule<tensor::CollapseShapeOp>>(*context);
    tensor::ExtractSliceOp::attachInterface<ExtractSliceShardingRule>(
        *context);
    tensor::PadOp::attachInterface<PadShardingRule>(*context);
  });
}
