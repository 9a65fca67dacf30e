//===- ShardInterop.cpp - upstream's shard dialect in tp terms -----------===//
#include "megatron/Dialect/TP/IR/ShardInterop.h"
#include "megatron_rt/contract.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::tp;

/// The names a grid's axes take: the runtime knows a data-parallel and a
/// tensor-parallel axis, the data-parallel one outer.
static FailureOr<SmallVector<StringRef>> axisNames(shard::GridOp grid) {
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

LogicalResult tp::importGrids(ModuleOp module) {
  OpBuilder b(module.getContext());
  for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>())) {
    FailureOr<SmallVector<StringRef>> axes = axisNames(grid);
    if (failed(axes))
      return failure();
    if (llvm::any_of(grid.getShape(), ShapedType::isDynamic))
      return grid.emitError("a grid of dynamic shape has no tp mesh");
    b.setInsertionPoint(grid);
    MeshOp::create(b, grid.getLoc(), grid.getSymName(),
                   b.getStrArrayAttr(*axes), grid.getShapeAttr(),
                   /*sub_axis_names=*/nullptr, /*sub_axis_sizes=*/nullptr,
                   /*sub_axis_parents=*/nullptr);
    grid.erase();
  }
  return success();
}

MeshOp tp::lookupMesh(Operation *user, FlatSymbolRefAttr mesh) {
  return SymbolTable::lookupNearestSymbolFrom<MeshOp>(user, mesh);
}

StringAttr tp::getMeshAxisName(MeshOp mesh, shard::GridAxis axis) {
  ArrayAttr names = mesh.getAxisNames();
  if (axis < 0 || axis >= static_cast<int64_t>(names.size()))
    return {};
  return cast<StringAttr>(names[axis]);
}

shard::GridAxis tp::getGridAxis(MeshOp mesh, StringRef axis) {
  auto names = mesh.getAxisNames().getAsValueRange<StringAttr>();
  return static_cast<shard::GridAxis>(
      std::distance(names.begin(), llvm::find(names, axis)));
}

shard::ReductionKind tp::toShardReduction(ReductionKind kind) {
  switch (kind) {
  case ReductionKind::sum:
    return shard::ReductionKind::Sum;
  case ReductionKind::max:
    return shard::ReductionKind::Max;
  }
  llvm_unreachable("unknown reduction kind");
}

std::optional<ReductionKind> tp::fromShardReduction(shard::ReductionKind kind) {
  switch (kind) {
  case shard::ReductionKind::Sum:
    return ReductionKind::sum;
  case shard::ReductionKind::Max:
    return ReductionKind::max;
  default:
    return std::nullopt;
  }
}
