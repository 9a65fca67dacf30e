//===- LinalgShardingRules.cpp - how linalg's structured ops may be split -===//
//
// A structured op states its parallel semantics in its indexing maps and
// iterator types: each loop of its iteration space is a factor, an operand
// dimension that a map sends to loop d is split with d, and a split
// reduction loop leaves the results partial sums. The named ops (matmul,
// batch_matmul, transpose, fill, broadcast, reduce) have the same maps, so
// one model serves every op of linalg's structured list.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/Extensions/ShardingRuleExtensions.h"
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::tp;

namespace {

using Dims = ShardingRule::TensorDims;

/// Whether every result reduces by a float addition into its init: only
/// sums can be left pending across ranks (a tp.g completes sums; a max or a
/// product over split rows is no partial sum).
bool reducesBySum(linalg::LinalgOp op) {
  for (unsigned pos = 0, e = op.getNumDpsInits(); pos < e; ++pos) {
    SmallVector<Operation *> combiners;
    if (!matchReduction(op.getRegionOutputArgs(), pos, combiners) ||
        combiners.size() != 1 || !isa<arith::AddFOp>(combiners.front()))
      return false;
  }
  return true;
}

/// Whether loop `loop` indexes every tensor dimension it appears in by
/// itself, once per tensor: a split of it is then a split of whole rows of
/// those dimensions. A loop inside an expression (a convolution's window)
/// or indexing two dimensions of one tensor (a diagonal) would need other
/// ranks' data.
bool indexesPlainly(linalg::LinalgOp op, unsigned loop) {
  for (AffineMap map : op.getIndexingMapsArray()) {
    int64_t uses = 0;
    for (AffineExpr expr : map.getResults()) {
      if (!expr.isFunctionOfDim(loop))
        continue;
      if (!isa<AffineDimExpr>(expr))
        return false;
      ++uses;
    }
    if (uses > 1)
      return false;
  }
  return true;
}

/// The factor of each loop, or kWhole for a loop every rank runs whole: a
/// reduction that is not a sum, a parallel loop some result does not index
/// (each rank would write all of that result), a loop not indexed plainly,
/// and every loop of an op with several results (tp records a sharding per
/// single-result op; such an op runs replicated).
SmallVector<int64_t> loopFactors(linalg::LinalgOp op, ShardingRule &rule) {
  SmallVector<int64_t> factors;
  bool sums = op.getNumReductionLoops() == 0 || reducesBySum(op);
  for (auto [loop, iterator] : llvm::enumerate(op.getIteratorTypesArray())) {
    bool reduction = iterator == utils::IteratorType::reduction;
    bool everyResultIndexes =
        llvm::all_of(op.getDpsInitsMutable(), [&](OpOperand &init) {
          return op.getMatchingIndexingMap(&init).isFunctionOfDim(loop);
        });
    bool splittable = op->getNumResults() == 1 &&
                      indexesPlainly(op, loop) &&
                      (reduction ? sums : everyResultIndexes);
    factors.push_back(splittable ? rule.addFactor(reduction)
                                 : ShardingRule::kWhole);
  }
  return factors;
}

Dims operandDims(linalg::LinalgOp op, OpOperand &operand,
                 ArrayRef<int64_t> factors) {
  Dims dims;
  if (!isa<RankedTensorType>(operand.get().getType()))
    return dims;
  for (AffineExpr expr : op.getMatchingIndexingMap(&operand).getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    dims.push_back({dim ? factors[dim.getPosition()] : ShardingRule::kWhole, 1});
  }
  return dims;
}

/// Whether `value` is all zeros: the neutral init of a sum.
bool isZero(Value value) {
  if (auto fill = value.getDefiningOp<linalg::FillOp>())
    value = fill.value();
  return matchPattern(value, m_AnyZeroFloat());
}

/// `init` on the first rank of every axis in `axes`, zeros elsewhere: a
/// split sum then adds its init once, not once per rank.
Value keepOnFirstRank(PartitionContext &context, Location loc, Value init,
                      ArrayRef<StringRef> axes) {
  OpBuilder &b = context.getBuilder();
  Value first;
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  for (StringRef axis : axes) {
    Value index = AxisIndexOp::create(b, loc, context.getMeshRef(),
                                      b.getStringAttr(axis));
    Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          index, zero);
    first = first ? arith::AndIOp::create(b, loc, first, isFirst) : isFirst;
  }
  auto type = cast<RankedTensorType>(init.getType());
  AffineMap identity = b.getMultiDimIdentityMap(type.getRank());
  Value empty = tensor::EmptyOp::create(b, loc, type.getShape(),
                                        type.getElementType());
  SmallVector<utils::IteratorType> parallel(type.getRank(),
                                            utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, type, ValueRange{init, buildZeros(b, loc, type)},
             ValueRange{empty}, {identity, identity, identity}, parallel,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               linalg::YieldOp::create(
                   nb, nl,
                   arith::SelectOp::create(nb, nl, first, args[0], args[1])
                       .getResult());
             })
      .getResult(0);
}

/// How one loop is split on this rank: over which axes, and how many of
/// its iterations the rank runs.
struct LoopSplit {
  SmallVector<StringRef> axes;
  int64_t localSize = 0;
};

/// Each loop's split, read from the first operand dimension it indexes;
/// tp-insert-conjugates gave every operand the layout the factors require,
/// so all of them agree.
SmallVector<LoopSplit> loopSplits(linalg::LinalgOp op,
                                  PartitionContext &context) {
  SmallVector<LoopSplit> splits(op.getNumLoops());
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.get().getType());
    ShardingAttr sharding = context.shardingOf(operand.get());
    if (!type || !sharding)
      continue;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    for (auto [index, expr] : llvm::enumerate(map.getResults())) {
      auto dim = dyn_cast<AffineDimExpr>(expr);
      if (!dim || splits[dim.getPosition()].localSize != 0)
        continue;
      LoopSplit &split = splits[dim.getPosition()];
      for (StringRef axis : sharding.getDimAxes(index))
        if (context.getMesh().getAxisSize(axis).value_or(1) > 1)
          split.axes.push_back(axis);
      split.localSize = type.getDimSize(index);
    }
  }
  return splits;
}

template <typename OpTy>
struct StructuredOpShardingRule
    : ShardingRuleOpInterface::ExternalModel<StructuredOpShardingRule<OpTy>,
                                             OpTy> {
  ShardingRule getShardingRule(Operation *op) const {
    auto linalgOp = cast<linalg::LinalgOp>(op);
    ShardingRule rule;
    SmallVector<int64_t> factors = loopFactors(linalgOp, rule);
    for (OpOperand &operand : op->getOpOperands())
      rule.operands.push_back(operandDims(linalgOp, operand, factors));
    for (OpOperand &init : linalgOp.getDpsInitsMutable())
      if (isa<RankedTensorType>(init.get().getType()))
        rule.results.push_back(operandDims(linalgOp, init, factors));
    return rule;
  }

  /// A split reduction adds each init once, on the first rank; a split
  /// loop's linalg.index counts from the rank's first iteration.
  LogicalResult partition(Operation *op, PartitionContext &context) const {
    auto linalgOp = cast<linalg::LinalgOp>(op);
    SmallVector<LoopSplit> splits = loopSplits(linalgOp, context);
    OpBuilder &b = context.getBuilder();
    SmallVector<StringRef> reductionAxes;
    for (auto [split, iterator] :
         llvm::zip(splits, linalgOp.getIteratorTypesArray()))
      if (iterator == utils::IteratorType::reduction)
        reductionAxes.append(split.axes.begin(), split.axes.end());
    if (!reductionAxes.empty()) {
      for (OpOperand &init : linalgOp.getDpsInitsMutable()) {
        if (isZero(init.get()))
          continue;
        b.setInsertionPoint(op);
        init.set(keepOnFirstRank(context, op->getLoc(), init.get(),
                                 reductionAxes));
      }
    }
    WalkResult result = linalgOp.getBlock()->walk([&](linalg::IndexOp index) {
      const LoopSplit &split = splits[index.getDim()];
      if (split.axes.empty())
        return WalkResult::advance();
      if (split.axes.size() > 1) {
        index.emitError("linalg.index of a loop split over several mesh "
                        "axes (")
            << llvm::join(split.axes, ", ") << ") is not supported";
        return WalkResult::interrupt();
      }
      b.setInsertionPoint(op);
      Value offset =
          context.rowOffset(op->getLoc(), split.axes.front(), split.localSize);
      b.setInsertionPointAfter(index);
      Value global = arith::AddIOp::create(b, index.getLoc(), index, offset);
      index.getResult().replaceAllUsesExcept(global, global.getDefiningOp());
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }
};

/// Attaches the model to every op of linalg's structured list.
template <typename... Ops>
void attachToAll(MLIRContext *context) {
  (Ops::template attachInterface<StructuredOpShardingRule<Ops>>(*context),
   ...);
}

} // namespace

void tp::registerLinalgShardingRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, linalg::LinalgDialect *) {
    attachToAll<
#define GET_OP_LIST
#include "mlir/Dialect/Linalg/IR/LinalgStructuredOps.cpp.inc"
        >(context);
  });
}
