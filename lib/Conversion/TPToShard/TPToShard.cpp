//===- TPToShard.cpp - the convert-tp-to-shard pass -----------------------===//
//
// A framework that hands us its linalg program may want it back partitioned
// in upstream's own terms, to go on with upstream's pipeline (for example
// convert-shard-to-mpi). The per-rank program megatron-partition-pipeline
// makes is linalg at local shapes plus tp collectives; this pass rewrites
// the collectives as shard collectives over a shard.grid that keeps the
// mesh's name and axis order, and drops the tp attributes, which only
// described the partition. A program still at global shapes has only its
// shardings to give: they become shard annotations, so that upstream's
// partitioner plans from the same ones as ours. The inverse of
// convert-shard-to-tp and tp-import-shard.
//
//===----------------------------------------------------------------------===//
#include "megatron/Conversion/Passes.h"
#include "megatron/Conversion/TPToShard/TPToShard.h"
#include "megatron/Dialect/TP/IR/ShardInterop.h"
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_CONVERTTPTOSHARD
#include "megatron/Conversion/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

namespace {

/// The one grid axis a tp collective runs over, as shard ops name them.
DenseI16ArrayAttr gridAxes(Operation *op, FlatSymbolRefAttr mesh,
                           StringRef axis) {
  return DenseI16ArrayAttr::get(op->getContext(),
                                {getGridAxis(lookupMesh(op, mesh), axis)});
}

shard::ReductionKindAttr reduction(MLIRContext *context, ReductionKind kind) {
  return shard::ReductionKindAttr::get(context, toShardReduction(kind));
}

/// f is the identity in a forward program: its gradient rule is spent.
struct FToInput : OpConversionPattern<FOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, adaptor.getInput());
    return success();
  }
};

/// One shard.all_reduce per input: upstream has no grouped or nonblocking
/// all-reduce.
template <typename Op>
SmallVector<Value> allReduceEach(ConversionPatternRewriter &rewriter, Op op,
                                 ValueRange inputs, ReductionKind kind) {
  DenseI16ArrayAttr axes = gridAxes(op, op.getMeshAttr(), op.getAxis());
  SmallVector<Value> sums;
  for (Value input : inputs)
    sums.push_back(shard::AllReduceOp::create(
        rewriter, op.getLoc(), input.getType(), op.getMeshAttr(), axes, input,
        reduction(op.getContext(), kind)));
  return sums;
}

/// g, all_reduce and a bucket: one shard.all_reduce per tensor, of the
/// collective's kind (a bucket's sums go one by one).
template <typename Op>
struct ReduceToAllReduce : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto collective = cast<CollectiveOpInterface>(op.getOperation());
    rewriter.replaceOp(op, allReduceEach(rewriter, op, adaptor.getOperands(),
                                         collective.getCollectiveReduction()));
    return success();
  }
};

/// all_gather and local_slice: the shard op of the same dimension.
template <typename Op, typename ShardOp>
struct DimCollectiveToShard : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<ShardOp>(
        op, op.getType(), op.getMeshAttr(),
        gridAxes(op, op.getMeshAttr(), op.getAxis()), adaptor.getInput(),
        rewriter.getIndexAttr(op.getDim()));
    return success();
  }
};

/// One shard.reduce_scatter along `dim` per input, each giving its type in
/// `local`: upstream has no grouped or nonblocking reduce-scatter.
template <typename Op>
SmallVector<Value> reduceScatterEach(ConversionPatternRewriter &rewriter,
                                     Op op, ValueRange inputs, TypeRange local,
                                     ReductionKind kind, int64_t dim) {
  SmallVector<Value> results;
  for (auto [input, type] : llvm::zip_equal(inputs, local))
    results.push_back(shard::ReduceScatterOp::create(
        rewriter, op.getLoc(), type, op.getMeshAttr(),
        gridAxes(op, op.getMeshAttr(), op.getAxis()), input,
        reduction(op.getContext(), kind), rewriter.getIndexAttr(dim)));
  return results;
}

struct ReduceScatterToReduceScatter : OpConversionPattern<ReduceScatterOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReduceScatterOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, reduceScatterEach(rewriter, op, adaptor.getInput(),
                                             op.getType(), op.getKind(),
                                             op.getDim()));
    return success();
  }
};

/// A bucket of reduce-scatters by rows: one shard.reduce_scatter each.
struct BucketToReduceScatters : OpConversionPattern<ReduceScatterBucketOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReduceScatterBucketOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, reduceScatterEach(rewriter, op, adaptor.getInputs(),
                                             op.getResultTypes(),
                                             ReductionKind::sum, /*dim=*/0));
    return success();
  }
};

/// Each started collective as shard collectives, one per input, of the
/// types `results` its wait gives.
SmallVector<Value> shardCollectives(ConversionPatternRewriter &rewriter,
                                    AllReduceStartOp op, ValueRange inputs,
                                    TypeRange) {
  return allReduceEach(rewriter, op, inputs, op.getKind());
}
SmallVector<Value> shardCollectives(ConversionPatternRewriter &rewriter,
                                    ReduceScatterStartOp op, ValueRange inputs,
                                    TypeRange results) {
  return reduceScatterEach(rewriter, op, inputs, results, ReductionKind::sum,
                           /*dim=*/0);
}
SmallVector<Value> shardCollectives(ConversionPatternRewriter &rewriter,
                                    AllGatherStartOp op, ValueRange inputs,
                                    TypeRange results) {
  SmallVector<Value> gathered;
  for (auto [input, type] : llvm::zip_equal(inputs, results))
    gathered.push_back(shard::AllGatherOp::create(
        rewriter, op.getLoc(), type, op.getMeshAttr(),
        gridAxes(op, op.getMeshAttr(), op.getAxis()), input,
        rewriter.getIndexAttr(0)));
  return gathered;
}

/// A started collective: shard collectives where it starts, and its wait's
/// results are theirs (upstream has no nonblocking collectives).
template <typename StartOp>
struct StartToShard : OpConversionPattern<StartOp> {
  using OpConversionPattern<StartOp>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(StartOp op, typename StartOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Operation *wait = op.getWait();
    rewriter.replaceOp(wait, shardCollectives(rewriter, op,
                                              adaptor.getInputs(),
                                              wait->getResultTypes()));
    rewriter.eraseOp(op);
    return success();
  }
};

struct AxisIndexToProcessIndex : OpConversionPattern<AxisIndexOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AxisIndexOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<shard::ProcessMultiIndexOp>(
        op, TypeRange{rewriter.getIndexType()}, op.getMeshAttr(),
        gridAxes(op, op.getMeshAttr(), op.getAxis()));
    return success();
  }
};

bool isPartitioned(Operation *op) {
  auto function = op->getParentOfType<func::FuncOp>();
  return function && function->hasAttr(TPDialect::kPartitionedAttrName);
}

/// Only collectives (a started one with its wait) have shard counterparts,
/// and only in a per-rank program: the tp dialect's transformer ops (matmul, attention, ...) are
/// lowered by megatron-compile instead, and a collective of a program at
/// global shapes (tp-insert-conjugates' output) says where a plan will
/// communicate, not what a rank runs.
LogicalResult verifyConvertible(ModuleOp module) {
  LogicalResult result = success();
  module.walk([&](Operation *op) {
    if (auto mesh = dyn_cast<MeshOp>(op); mesh && mesh.getSubAxisNames()) {
      mesh.emitError("mesh @")
          << mesh.getSymName()
          << " factors an axis into sub-axes, which a shard grid cannot state";
      result = failure();
    }
    if (!isa<TPDialect>(op->getDialect()) || isa<MeshOp>(op))
      return;
    if (!isa<CollectiveOpInterface, AxisIndexOp, WaitOp>(op))
      op->emitError() << "'" << op->getName()
                      << "' has no shard counterpart: convert-tp-to-shard "
                         "exports the collectives of a partitioned linalg "
                         "program (megatron-compile lowers the tp dialect's "
                         "own ops)";
    else if (!isPartitioned(op))
      op->emitError() << "'" << op->getName()
                      << "' in a program at global shapes: convert-tp-to-shard "
                         "exports the collectives of a partitioned program, "
                         "or the shardings of one to plan";
    else
      return;
    result = failure();
  });
  return result;
}

/// The shard.sharding of `sharding`, built before `user`: split axes by
/// grid axis. Sections and pending sums have no shard annotation.
FailureOr<Value> buildSharding(OpBuilder &b, Location loc, Operation *user,
                               ShardingAttr sharding) {
  if (!sharding.getSections().empty() || !sharding.getPartialAxes().empty())
    return emitError(loc) << sharding
                          << " has sections or pending sums, which shard "
                             "annotations cannot state";
  MeshOp mesh = lookupMesh(user, sharding.getMesh());
  SmallVector<shard::GridAxesAttr> split;
  for (unsigned dim = 0; dim < sharding.getDims().size(); ++dim) {
    SmallVector<shard::GridAxis> axes;
    for (StringRef axis : sharding.getDimAxes(dim))
      axes.push_back(getGridAxis(mesh, axis));
    split.push_back(shard::GridAxesAttr::get(b.getContext(), axes));
  }
  return shard::ShardingOp::create(b, loc, sharding.getMesh(), split)
      .getResult();
}

/// `value` annotated with `sharding` for upstream's sharding-propagation:
/// its users read the shard.shard instead.
LogicalResult annotate(OpBuilder &b, Location loc, Value value,
                       ShardingAttr sharding) {
  FailureOr<Value> built =
      buildSharding(b, loc, b.getInsertionBlock()->getParentOp(), sharding);
  if (failed(built))
    return failure();
  auto shard = shard::ShardOp::create(b, loc, value, *built);
  value.replaceAllUsesExcept(shard.getResult(), shard);
  return success();
}

/// A program to plan, in upstream's terms: every tp.sharding (the
/// arguments' ones, and any op result's a caller pinned) becomes a
/// shard.shard of its value, which upstream's sharding-propagation reads.
LogicalResult annotateShardings(func::FuncOp function) {
  OpBuilder b(function.getContext());
  b.setInsertionPointToStart(&function.getBody().front());
  for (BlockArgument arg : function.getArguments())
    if (ShardingAttr sharding = getSharding(arg))
      if (failed(annotate(b, arg.getLoc(), arg, sharding)))
        return failure();
  WalkResult walk = function.walk([&](Operation *op) {
    auto sharding =
        op->getAttrOfType<ShardingAttr>(TPDialect::kShardingAttrName);
    if (!sharding || op->getNumResults() != 1)
      return WalkResult::advance();
    b.setInsertionPointAfter(op);
    return failed(annotate(b, op->getLoc(), op->getResult(0), sharding))
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

/// Each mesh as the grid of the same name, axis order and sizes.
void convertMeshes(ModuleOp module) {
  OpBuilder b(module.getContext());
  for (auto mesh : llvm::make_early_inc_range(module.getOps<MeshOp>())) {
    b.setInsertionPoint(mesh);
    shard::GridOp::create(b, mesh.getLoc(), mesh.getSymNameAttr(),
                          mesh.getAxisSizesAttr());
    mesh.erase();
  }
}

/// Drops the tp attributes (shardings, global shapes, names, roles, the
/// partitioned marker) of `attrs`: the partition they described is done.
NamedAttrList withoutTPAttributes(ArrayRef<NamedAttribute> attrs) {
  NamedAttrList kept;
  for (NamedAttribute attr : attrs)
    if (!attr.getName().strref().starts_with("tp."))
      kept.push_back(attr);
  return kept;
}

void dropTPAttributes(ModuleOp module) {
  module->walk([](Operation *op) {
    op->setDiscardableAttrs(
        withoutTPAttributes(op->getDiscardableAttrDictionary().getValue())
            .getDictionary(op->getContext()));
    auto function = dyn_cast<FunctionOpInterface>(op);
    if (!function)
      return;
    for (unsigned i = 0; i < function.getNumArguments(); ++i)
      function.setArgAttrs(
          i, withoutTPAttributes(function.getArgAttrs(i)).getAttrs());
    for (unsigned i = 0; i < function.getNumResults(); ++i)
      function.setResultAttrs(
          i, withoutTPAttributes(function.getResultAttrs(i)).getAttrs());
  });
}

struct ConvertTPToShardPass
    : megatron::impl::ConvertTPToShardBase<ConvertTPToShardPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(tp::verifyProgramDialects(module, getArgument())) ||
        failed(verifyConvertible(module)))
      return signalPassFailure();
    for (func::FuncOp function : definedFunctions(module))
      if (!function->hasAttr(TPDialect::kPartitionedAttrName) &&
          failed(annotateShardings(function)))
        return signalPassFailure();
    ConversionTarget target(getContext());
    target.addLegalDialect<shard::ShardDialect>();
    target.addIllegalDialect<TPDialect>();
    target.addLegalOp<MeshOp>(); // after the collectives: they look it up
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateTPToShardPatterns(patterns);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    convertMeshes(module);
    dropTPAttributes(module);
  }
};

} // namespace

void megatron::populateTPToShardPatterns(RewritePatternSet &patterns) {
  patterns.add<FToInput, ReduceToAllReduce<GOp>, ReduceToAllReduce<AllReduceOp>,
               ReduceToAllReduce<AllReduceBucketOp>,
               StartToShard<AllReduceStartOp>,
               DimCollectiveToShard<AllGatherOp, shard::AllGatherOp>,
               ReduceScatterToReduceScatter, BucketToReduceScatters,
               StartToShard<ReduceScatterStartOp>,
               StartToShard<AllGatherStartOp>,
               DimCollectiveToShard<LocalSliceOp, shard::AllSliceOp>,
               AxisIndexToProcessIndex>(patterns.getContext());
}
