//===- ShardToTP.cpp - the convert-shard-to-tp pass -----------------------===//
//
// Upstream's shard-partition turns an annotated program into a per-rank one
// with shard collectives. Read as a tp per-rank program, it is measured by
// the same tools as our own plan (tp-explain), so the two plans for the
// same annotations compare in one report. The inverse of
// convert-tp-to-shard; grids become meshes through ShardInterop.h, as in
// tp-import-shard.
//
//===----------------------------------------------------------------------===//
#include "megatron/Conversion/Passes.h"
#include "megatron/Conversion/ShardToTP/ShardToTP.h"
#include "megatron/Dialect/TP/IR/ShardInterop.h"

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_CONVERTSHARDTOTP
#include "megatron/Conversion/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

namespace {

/// The mesh axis of a collective over one grid axis (verifyConvertible
/// checked that there is one).
StringAttr meshAxis(Operation *op, FlatSymbolRefAttr grid,
                    ArrayRef<shard::GridAxis> axes) {
  return getMeshAxisName(lookupMesh(op, grid), axes.front());
}

/// A reduction verifyConvertible let through (a sum or a maximum).
ReductionKindAttr reduction(MLIRContext *context, shard::ReductionKind kind) {
  return ReductionKindAttr::get(context, *fromShardReduction(kind));
}

struct AllReduceToAllReduce : OpConversionPattern<shard::AllReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(shard::AllReduceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<AllReduceOp>(
        op, op.getType(), adaptor.getInput(),
        reduction(op.getContext(), op.getReduction()), op.getGridAttr(),
        meshAxis(op, op.getGridAttr(), op.getGridAxes()));
    return success();
  }
};

/// The tensor dimension a shard collective gathers or slices.
int64_t tensorDim(shard::AllGatherOp op) {
  return op.getGatherAxis().getSExtValue();
}
int64_t tensorDim(shard::AllSliceOp op) {
  return op.getSliceAxis().getSExtValue();
}

/// all_gather and all_slice: the tp op of the same dimension.
template <typename ShardOp, typename Op>
struct DimCollectiveToTP : OpConversionPattern<ShardOp> {
  using OpConversionPattern<ShardOp>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ShardOp op, typename ShardOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<Op>(
        op, op.getType(), adaptor.getInput(), op.getGridAttr(),
        meshAxis(op, op.getGridAttr(), op.getGridAxes()),
        rewriter.getI64IntegerAttr(tensorDim(op)));
    return success();
  }
};

struct ReduceScatterToReduceScatter
    : OpConversionPattern<shard::ReduceScatterOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(shard::ReduceScatterOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<ReduceScatterOp>(
        op, op.getType(), adaptor.getInput(),
        reduction(op.getContext(), op.getReduction()), op.getGridAttr(),
        meshAxis(op, op.getGridAttr(), op.getGridAxes()),
        rewriter.getI64IntegerAttr(op.getScatterAxis().getSExtValue()));
    return success();
  }
};

/// The grid axes an index query names: all of them when it names none.
SmallVector<shard::GridAxis> queriedAxes(MeshOp mesh,
                                         ArrayRef<shard::GridAxis> axes) {
  if (!axes.empty())
    return llvm::to_vector(axes);
  return llvm::to_vector(llvm::map_range(
      llvm::seq<int64_t>(mesh.getAxisNames().size()),
      [](int64_t axis) { return static_cast<shard::GridAxis>(axis); }));
}

/// The rank's index along each queried axis, one tp.axis_index each.
struct ProcessIndexToAxisIndex
    : OpConversionPattern<shard::ProcessMultiIndexOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(shard::ProcessMultiIndexOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MeshOp mesh = lookupMesh(op, op.getGridAttr());
    SmallVector<Value> indices;
    for (shard::GridAxis axis : queriedAxes(mesh, op.getAxes()))
      indices.push_back(AxisIndexOp::create(rewriter, op.getLoc(),
                                            op.getGridAttr(),
                                            getMeshAxisName(mesh, axis)));
    rewriter.replaceOp(op, indices);
    return success();
  }
};

/// A mesh's sizes are static: each queried size is a constant.
struct GridShapeToConstants : OpConversionPattern<shard::GridShapeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(shard::GridShapeOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MeshOp mesh = lookupMesh(op, op.getGridAttr());
    SmallVector<Value> sizes;
    for (shard::GridAxis axis : queriedAxes(mesh, op.getAxes()))
      sizes.push_back(arith::ConstantIndexOp::create(
          rewriter, op.getLoc(), mesh.getAxisSizes()[axis]));
    rewriter.replaceOp(op, sizes);
    return success();
  }
};

/// Why `op` has no tp counterpart, or "" when the patterns convert it.
std::string whyUnconvertible(Operation *op) {
  if (isa<shard::ShardingOp, shard::ShardOp>(op))
    return "is a sharding annotation: convert-shard-to-tp reads a program "
           "upstream partitioned (tp-import-shard reads annotations)";
  ArrayRef<shard::GridAxis> axes;
  std::optional<shard::ReductionKind> kind;
  if (auto allReduce = dyn_cast<shard::AllReduceOp>(op)) {
    axes = allReduce.getGridAxes();
    kind = allReduce.getReduction();
  } else if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op)) {
    axes = scatter.getGridAxes();
    kind = scatter.getReduction();
  } else if (auto gather = dyn_cast<shard::AllGatherOp>(op)) {
    axes = gather.getGridAxes();
  } else if (auto slice = dyn_cast<shard::AllSliceOp>(op)) {
    axes = slice.getGridAxes();
  } else if (isa<shard::GridOp, shard::ProcessMultiIndexOp,
                 shard::GridShapeOp>(op)) {
    return "";
  } else {
    return "has no tp counterpart: convert-shard-to-tp reads all-reduces, "
           "all-gathers, reduce-scatters, all-slices and the rank's index";
  }
  if (axes.size() != 1)
    return "runs over " + std::to_string(axes.size()) +
           " grid axes: a tp collective runs over one mesh axis";
  if (kind && !fromShardReduction(*kind))
    return "reduces by '" + shard::stringifyReductionKind(*kind).str() +
           "': tp collectives sum or take the maximum";
  return "";
}

LogicalResult verifyConvertible(ModuleOp module) {
  LogicalResult result = success();
  module.walk([&](Operation *op) {
    if (!isa<shard::ShardDialect>(op->getDialect()))
      return;
    if (std::string why = whyUnconvertible(op); !why.empty()) {
      op->emitError() << "'" << op->getName() << "' " << why;
      result = failure();
    }
  });
  return result;
}

struct ConvertShardToTPPass
    : megatron::impl::ConvertShardToTPBase<ConvertShardToTPPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyConvertible(module)) || failed(importGrids(module)))
      return signalPassFailure();
    ConversionTarget target(getContext());
    target.addIllegalDialect<shard::ShardDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateShardToTPPatterns(patterns);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    // Upstream's functions are per-rank now, as tp-partition's are.
    UnitAttr partitioned = UnitAttr::get(&getContext());
    for (func::FuncOp function : definedFunctions(module))
      function->setAttr(TPDialect::kPartitionedAttrName, partitioned);
  }
};

} // namespace

void megatron::populateShardToTPPatterns(RewritePatternSet &patterns) {
  patterns.add<AllReduceToAllReduce,
               DimCollectiveToTP<shard::AllGatherOp, AllGatherOp>,
               ReduceScatterToReduceScatter,
               DimCollectiveToTP<shard::AllSliceOp, LocalSliceOp>,
               ProcessIndexToAxisIndex, GridShapeToConstants>(
      patterns.getContext());
}
