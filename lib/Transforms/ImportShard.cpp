//===- ImportShard.cpp - upstream shard annotations as tp shardings -------===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Transforms/Passes.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_IMPORTSHARD
#include "megatron/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

/// The names a grid's axes take: the runtime knows a data-parallel and a
/// tensor-parallel axis, the data-parallel one outer.
FailureOr<SmallVector<StringRef>> axisNames(shard::GridOp grid) {
  switch (grid.getShape().size()) {
  case 1:
    return SmallVector<StringRef>{MGT_AXIS_NAME_TP};
  case 2:
    return SmallVector<StringRef>{MGT_AXIS_NAME_DP, MGT_AXIS_NAME_TP};
  default:
    return grid.emitError("a grid of ")
           << grid.getShape().size()
           << " axes has no tp mesh: tp meshes have a tensor-parallel axis "
              "and at most one data-parallel axis before it";
  }
}

/// Each grid as a tp.mesh of the same name; the axis names by grid.
FailureOr<DenseMap<StringAttr, SmallVector<StringRef>>>
importGrids(ModuleOp module) {
  DenseMap<StringAttr, SmallVector<StringRef>> names;
  OpBuilder b(module.getContext());
  for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>())) {
    FailureOr<SmallVector<StringRef>> axes = axisNames(grid);
    if (failed(axes))
      return failure();
    if (llvm::any_of(grid.getShape(), ShapedType::isDynamic))
      return grid.emitError("a grid of dynamic shape has no tp mesh");
    b.setInsertionPoint(grid);
    MeshOp::create(b, grid.getLoc(), grid.getSymName(),
                   b.getStrArrayAttr(*axes), grid.getShapeAttr());
    names[grid.getSymNameAttr()] = *axes;
    grid.erase();
  }
  return names;
}

/// The tp sharding of a `rank`-d tensor `sharding` describes.
FailureOr<ShardingAttr>
importSharding(shard::ShardingOp sharding, int64_t rank,
               const DenseMap<StringAttr, SmallVector<StringRef>> &names) {
  if (!sharding.getStaticHaloSizes().empty() ||
      !sharding.getDynamicHaloSizes().empty() ||
      !sharding.getStaticShardedDimsOffsets().empty() ||
      !sharding.getDynamicShardedDimsOffsets().empty())
    return sharding.emitError("halos and uneven shards have no tp sharding");
  auto axes = names.find(sharding.getGridAttr().getAttr());
  if (axes == names.end())
    return sharding.emitError("the grid ")
           << sharding.getGridAttr() << " is no shard.grid of the module";
  MLIRContext *context = sharding.getContext();
  SmallVector<Attribute> dims;
  for (shard::GridAxesAttr split : sharding.getSplitAxes().getAxes()) {
    SmallVector<StringRef> dimAxes;
    for (int16_t axis : split.asArrayRef())
      dimAxes.push_back(axes->second[axis]);
    dims.push_back(Builder(context).getStrArrayAttr(dimAxes));
  }
  if (static_cast<int64_t>(dims.size()) > rank)
    return sharding.emitError("splits ")
           << dims.size() << " dimensions of a " << rank << "-d tensor";
  while (static_cast<int64_t>(dims.size()) < rank)
    dims.push_back(ArrayAttr::get(context, {}));
  return ShardingAttr::get(context, sharding.getGridAttr(),
                           ArrayAttr::get(context, dims), ArrayAttr(), {});
}

/// Whether `value` carries its own tp.sharding: a function argument, or the
/// one result of its op.
bool holdsSharding(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value))
    return isa<FunctionOpInterface>(arg.getOwner()->getParentOp());
  return value.getDefiningOp()->getNumResults() == 1;
}

/// A shard.shard as the annotation of its value, or as a tp.reshard for its
/// users.
LogicalResult importShard(shard::ShardOp shard, ShardingAttr sharding) {
  Value value = shard.getSrc();
  if (!shard.getAnnotateForUsers() && holdsSharding(value)) {
    if (ShardingAttr existing = getSharding(value);
        existing && existing != sharding)
      return shard.emitError("annotates a value already annotated ")
             << existing;
    setSharding(value, sharding);
    shard.replaceAllUsesWith(value);
  } else {
    OpBuilder b(shard);
    auto reshard = ReshardOp::create(b, shard.getLoc(), value);
    setSharding(reshard.getResult(), sharding);
    shard.replaceAllUsesWith(reshard.getResult());
  }
  shard.erase();
  return success();
}

/// Fails at the first shard op that is no annotation (a collective of a
/// program upstream already partitioned): the annotations are read, the
/// rest would be left naming a grid that is gone.
LogicalResult verifyAnnotationsOnly(ModuleOp module) {
  WalkResult result = module.walk([&](Operation *op) {
    if (!isa<shard::ShardDialect>(op->getDialect()) ||
        isa<shard::GridOp, shard::ShardingOp, shard::ShardOp>(op))
      return WalkResult::advance();
    op->emitError("'")
        << op->getName()
        << "' is no sharding annotation: tp-import-shard reads shard.grid, "
           "shard.sharding and shard.shard, and plans programs upstream has "
           "not partitioned";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

struct ImportShardPass
    : public megatron::impl::ImportShardBase<ImportShardPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyAnnotationsOnly(module)))
      return signalPassFailure();
    FailureOr<DenseMap<StringAttr, SmallVector<StringRef>>> names =
        importGrids(module);
    if (failed(names))
      return signalPassFailure();
    SmallVector<shard::ShardOp> shards;
    module.walk([&](shard::ShardOp shard) { shards.push_back(shard); });
    for (shard::ShardOp shard : shards) {
      auto definition = shard.getSharding().getDefiningOp<shard::ShardingOp>();
      if (!definition) {
        shard.emitError("its sharding is no shard.sharding op");
        return signalPassFailure();
      }
      FailureOr<ShardingAttr> sharding = importSharding(
          definition, shard.getSrc().getType().getRank(), *names);
      if (failed(sharding) || failed(importShard(shard, *sharding)))
        return signalPassFailure();
    }
    module.walk([&](shard::ShardingOp sharding) {
      if (sharding->use_empty())
        sharding.erase();
    });
  }
};

} // namespace
