//===- Partition.cpp - the global program as one per-rank SPMD program ----===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tp-partition"

namespace mlir::megatron {
#define GEN_PASS_DEF_PARTITION
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

RankedTensorType localType(Type global, ShardingAttr sharding, MeshOp mesh) {
  auto tensor = cast<RankedTensorType>(global);
  return tensor.clone(getLocalShape(tensor.getShape(), sharding, mesh));
}

/// The global program as this rank's: every type local, then each op's own
/// rewrite (ShardingRuleOpInterface::partition).
class Partitioner {
public:
  Partitioner(MeshOp mesh, DenseMap<Value, ShardingAttr> shardings)
      : mesh(mesh), context(mesh, std::move(shardings)) {}

  LogicalResult partition(func::FuncOp function) {
    localizeArguments(function);
    SmallVector<Operation *> ops;
    function.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops) {
      localizeResults(op);
      if (auto rule = dyn_cast<ShardingRuleOpInterface>(op)) {
        LLVM_DEBUG(llvm::dbgs() << "partitioning " << op->getName() << " at "
                                << op->getLoc() << "\n");
        if (failed(rule.partition(context)))
          return failure();
      }
    }
    OpBuilder &b = context.getBuilder();
    function.setType(b.getFunctionType(
        function.front().getArgumentTypes(),
        function.front().getTerminator()->getOperandTypes()));
    function->setAttr(TPDialect::kPartitionedAttrName, b.getUnitAttr());
    return success();
  }

private:
  /// Arguments become this rank's slice; their sharding stays, describing
  /// the global tensor whose shape tp.global_shape records.
  void localizeArguments(func::FuncOp function) {
    OpBuilder &b = context.getBuilder();
    for (BlockArgument arg : function.getArguments()) {
      ShardingAttr sharding = context.shardingOf(arg);
      if (!sharding)
        continue;
      auto global = cast<RankedTensorType>(arg.getType());
      function.setArgAttr(arg.getArgNumber(), TPDialect::kGlobalShapeAttrName,
                          b.getDenseI64ArrayAttr(global.getShape()));
      arg.setType(localType(global, sharding, mesh));
    }
  }

  void localizeResults(Operation *op) {
    for (Value result : op->getResults())
      if (ShardingAttr sharding = context.shardingOf(result))
        result.setType(localType(result.getType(), sharding, mesh));
    op->removeAttr(TPDialect::kShardingAttrName);
  }

  MeshOp mesh;
  PartitionContext context;
};

/// Each op's rule partitions it from its operands' and results' shardings;
/// a result without one (tp-propagate not run) would keep its global shape
/// beside local operands.
LogicalResult
verifyEveryResultSharded(func::FuncOp function,
                         const DenseMap<Value, ShardingAttr> &shardings) {
  WalkResult walk = function.walk([&](ShardingRuleOpInterface op) {
    for (Value result : op->getResults())
      if (isa<RankedTensorType>(result.getType()) && !shardings.count(result)) {
        op->emitOpError("has a result without a sharding: tp-partition "
                        "needs one on every value (tp-propagate completes "
                        "them)");
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

struct PartitionPass : public megatron::impl::PartitionBase<PartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyGlobalProgram(module, getArgument(),
                                   ProgramDialects::TPAndLinalg)))
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
      if (failed(verifyEveryResultSharded(function, shardings)))
        return signalPassFailure();
      if (failed(Partitioner(mesh, std::move(shardings)).partition(function)))
        return signalPassFailure();
    }
    foldSequenceParallelCollectives(module);
  }

  /// Sequence parallelism's collectives, from what partition wrote: a g's
  /// sum sliced is a reduce-scatter, a gather entering f a tp.sp_gather.
  void foldSequenceParallelCollectives(ModuleOp module) {
    RewritePatternSet patterns(&getContext());
    LocalSliceOp::getCanonicalizationPatterns(patterns, &getContext());
    FOp::getCanonicalizationPatterns(patterns, &getContext());
    // One walk, without the greedy driver's folding and constant hoisting:
    // the program is otherwise as partition wrote it.
    walkAndApplyPatterns(module, std::move(patterns));
  }
};

} // namespace
