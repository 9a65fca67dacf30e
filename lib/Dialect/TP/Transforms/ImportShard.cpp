//===- ImportShard.cpp - upstream shard annotations as tp shardings -------===//
#include "megatron/Dialect/TP/IR/ShardInterop.h"
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_IMPORTSHARD
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

/// The tp sharding of a `rank`-d tensor `sharding` describes, on the mesh
/// importGrids made of its grid.
FailureOr<ShardingAttr> importSharding(shard::ShardingOp sharding,
                                       int64_t rank) {
  if (!sharding.getStaticHaloSizes().empty() ||
      !sharding.getDynamicHaloSizes().empty() ||
      !sharding.getStaticShardedDimsOffsets().empty() ||
      !sharding.getDynamicShardedDimsOffsets().empty())
    return sharding.emitError("halos and uneven shards have no tp sharding");
  MeshOp mesh = lookupMesh(sharding, sharding.getGridAttr());
  if (!mesh)
    return sharding.emitError("the grid ")
           << sharding.getGridAttr() << " is no shard.grid of the module";
  MLIRContext *context = sharding.getContext();
  SmallVector<Attribute> dims;
  for (shard::GridAxesAttr split : sharding.getSplitAxes().getAxes()) {
    SmallVector<Attribute> dimAxes;
    for (shard::GridAxis axis : split.asArrayRef())
      dimAxes.push_back(getMeshAxisName(mesh, axis));
    dims.push_back(ArrayAttr::get(context, dimAxes));
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
           "not partitioned (convert-shard-to-tp reads those it has)";
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
    if (failed(importGrids(module)))
      return signalPassFailure();
    SmallVector<shard::ShardOp> shards;
    module.walk([&](shard::ShardOp shard) { shards.push_back(shard); });
    for (shard::ShardOp shard : shards) {
      auto definition = shard.getSharding().getDefiningOp<shard::ShardingOp>();
      if (!definition) {
        shard.emitError("its sharding is no shard.sharding op");
        return signalPassFailure();
      }
      FailureOr<ShardingAttr> sharding =
          importSharding(definition, shard.getSrc().getType().getRank());
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
