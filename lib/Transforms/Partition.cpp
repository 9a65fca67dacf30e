//===- Partition.cpp - the global program as one per-rank SPMD program ----===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_PARTITION
#include "megatron/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

RankedTensorType localType(Type global, ShardingAttr sharding, MeshOp mesh) {
  auto tensor = cast<RankedTensorType>(global);
  return tensor.clone(getLocalShape(tensor.getShape(), sharding, mesh));
}

/// The single mesh axis a dimension is split over, if it really splits.
std::optional<StringRef> splitAxis(ShardingAttr sharding, unsigned dim,
                                   MeshOp mesh) {
  for (StringRef axis : sharding.getDimAxes(dim))
    if (mesh.getAxisSize(axis).value_or(1) > 1)
      return axis;
  return std::nullopt;
}

class Partitioner {
public:
  Partitioner(MeshOp mesh, DenseMap<Value, ShardingAttr> shardings)
      : mesh(mesh), meshRef(FlatSymbolRefAttr::get(mesh)),
        shardings(std::move(shardings)), b(mesh.getContext()) {}

  LogicalResult partition(func::FuncOp function) {
    localizeArguments(function);
    SmallVector<Operation *> ops;
    function.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops)
      if (failed(partition(op)))
        return failure();
    function.setType(b.getFunctionType(
        function.front().getArgumentTypes(),
        function.front().getTerminator()->getOperandTypes()));
    function->setAttr(TPDialect::kPartitionedAttrName, b.getUnitAttr());
    return success();
  }

private:
  ShardingAttr shardingOf(Value value) { return shardings.lookup(value); }

  /// Arguments become this rank's slice; their sharding stays, describing
  /// the global tensor whose shape tp.global_shape records.
  void localizeArguments(func::FuncOp function) {
    for (BlockArgument arg : function.getArguments()) {
      ShardingAttr sharding = shardingOf(arg);
      if (!sharding)
        continue;
      auto global = cast<RankedTensorType>(arg.getType());
      function.setArgAttr(arg.getArgNumber(), TPDialect::kGlobalShapeAttrName,
                          b.getDenseI64ArrayAttr(global.getShape()));
      arg.setType(localType(global, sharding, mesh));
    }
  }

  LogicalResult partition(Operation *op) {
    if (auto reshard = dyn_cast<ReshardOp>(op))
      return materialize(reshard);
    if (auto attention = dyn_cast<AttentionOp>(op))
      localizeHeads(attention);
    if (auto embedding = dyn_cast<EmbeddingOp>(op))
      offsetVocabulary(embedding);
    localizeResults(op);
    if (auto loss = dyn_cast<CrossEntropyOp>(op))
      decomposeCrossEntropy(loss);
    return success();
  }

  void localizeResults(Operation *op) {
    for (Value result : op->getResults())
      if (ShardingAttr sharding = shardingOf(result))
        result.setType(localType(result.getType(), sharding, mesh));
    op->removeAttr(TPDialect::kShardingAttrName);
  }

  /// Each rank keeps num_heads / N whole heads of q, k and v.
  void localizeHeads(AttentionOp attention) {
    ShardingAttr qkv = shardingOf(attention.getQkv());
    int64_t shards = 1;
    for (StringRef axis : qkv.getDimAxes(2))
      shards *= *mesh.getAxisSize(axis);
    attention.setNumHeads(attention.getNumHeads() / shards);
  }

  /// This rank's first row of a tensor whose dimension of `localSize` rows
  /// is split over `axis`: axis_index * localSize.
  Value rowOffset(Location loc, StringRef axis, int64_t localSize) {
    Value index =
        AxisIndexOp::create(b, loc, meshRef, b.getStringAttr(axis));
    Value size = arith::ConstantIndexOp::create(b, loc, localSize);
    return arith::MulIOp::create(b, loc, index, size);
  }

  void offsetVocabulary(EmbeddingOp embedding) {
    std::optional<StringRef> axis =
        splitAxis(shardingOf(embedding.getTable()), 0, mesh);
    if (!axis)
      return;
    b.setInsertionPoint(embedding);
    int64_t rows = embedding.getTable().getType().getDimSize(0);
    embedding.getOffsetMutable().assign(
        rowOffset(embedding.getLoc(), *axis, rows));
  }

  /// Megatron's vocabulary-parallel cross-entropy: the logits stay split,
  /// only per-token [B, T] statistics cross ranks. Unsplit logits take the
  /// same pieces without the all-reduces, so training has one gradient rule.
  void decomposeCrossEntropy(CrossEntropyOp loss) {
    ShardingAttr logitsSharding = shardingOf(loss.getLogits());
    auto logits = loss.getLogits();
    unsigned vocabDim = logits.getType().getRank() - 1;
    std::optional<StringRef> axis =
        logitsSharding ? splitAxis(logitsSharding, vocabDim, mesh)
                       : std::nullopt;
    Location loc = loss.getLoc();
    b.setInsertionPoint(loss);
    Value offset =
        axis ? rowOffset(loc, *axis, logits.getType().getDimSize(vocabDim))
             : arith::ConstantIndexOp::create(b, loc, 0).getResult();
    auto allReduce = [&](Value value, ReductionKind kind) -> Value {
      if (!axis)
        return value;
      return AllReduceOp::create(
          b, loc, value, ReductionKindAttr::get(b.getContext(), kind), meshRef,
          b.getStringAttr(*axis));
    };
    auto tokens = RankedTensorType::get(
        logits.getType().getShape().drop_back(),
        logits.getType().getElementType());
    int64_t valid = loss.getValidVocab();
    Value localMax =
        XentMaxOp::create(b, loc, tokens, logits, offset, valid);
    Value max = allReduce(localMax, ReductionKind::max);
    auto sums = XentSumExpOp::create(b, loc, logits, max, loss.getTargets(),
                                     offset, b.getI64IntegerAttr(valid));
    Value sumExp = allReduce(sums.getSumExp(), ReductionKind::sum);
    Value target = allReduce(sums.getTargetLogit(), ReductionKind::sum);
    Value result = XentLossOp::create(b, loc, loss.getType(), sumExp, max,
                                      target);
    loss.replaceAllUsesWith(result);
    loss.erase();
  }

  /// A reshard becomes an all-gather of each dimension that stops being
  /// split and a local slice of each that starts being split.
  LogicalResult materialize(ReshardOp reshard) {
    ShardingAttr from = shardingOf(reshard.getInput());
    ShardingAttr to = shardingOf(reshard.getResult());
    b.setInsertionPoint(reshard);
    Value value = reshard.getInput();
    for (unsigned dim = 0, e = reshard.getType().getRank(); dim < e; ++dim) {
      std::optional<StringRef> before = splitAxis(from, dim, mesh);
      std::optional<StringRef> after = splitAxis(to, dim, mesh);
      if (before == after)
        continue;
      if ((before && from.getDimSections(dim) != 1) ||
          (after && to.getDimSections(dim) != 1))
        return reshard.emitOpError(
            "cannot reshard a dimension split into sections");
      auto type = cast<RankedTensorType>(value.getType());
      SmallVector<int64_t> shape(type.getShape());
      if (before) {
        shape[dim] *= *mesh.getAxisSize(*before);
        value = AllGatherOp::create(b, reshard.getLoc(), type.clone(shape),
                                    value, meshRef.getValue(), *before, dim);
        type = cast<RankedTensorType>(value.getType());
      }
      if (after) {
        shape[dim] /= *mesh.getAxisSize(*after);
        value = LocalSliceOp::create(b, reshard.getLoc(), type.clone(shape),
                                     value, meshRef.getValue(), *after, dim);
      }
    }
    reshard.replaceAllUsesWith(value);
    reshard.erase();
    return success();
  }

  MeshOp mesh;
  FlatSymbolRefAttr meshRef;
  DenseMap<Value, ShardingAttr> shardings;
  OpBuilder b;
};

struct PartitionPass : public megatron::impl::PartitionBase<PartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyGlobalProgram(module, getArgument())))
      return signalPassFailure();
    SymbolTableCollection symbols;
    for (auto function : module.getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      // Read every sharding before types change under them.
      DenseMap<Value, ShardingAttr> shardings;
      MeshOp mesh;
      auto record = [&](Value value) {
        ShardingAttr sharding = getSharding(value);
        if (!sharding)
          return;
        shardings[value] = sharding;
        if (!mesh)
          mesh = symbols.lookupNearestSymbolFrom<MeshOp>(function,
                                                         sharding.getMesh());
      };
      for (BlockArgument arg : function.getArguments())
        record(arg);
      function.walk([&](Operation *op) {
        for (Value result : op->getResults())
          record(result);
      });
      if (!mesh)
        continue;
      if (failed(Partitioner(mesh, std::move(shardings)).partition(function)))
        return signalPassFailure();
    }
  }
};

} // namespace
