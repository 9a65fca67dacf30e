//===- Propagate.cpp - complete shardings from a few annotations ----------===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tp-propagate"

namespace mlir::megatron {
#define GEN_PASS_DEF_PROPAGATE
#include "megatron/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

/// Shardings known so far; user annotations are fixed.
struct PropagationState {
  DenseMap<Value, ShardingAttr> known;
  DenseSet<Value> fixed;
  FlatSymbolRefAttr mesh;
};

bool isTensor(Value value) { return isa<RankedTensorType>(value.getType()); }

/// Reports, once per op, the factors where two shardings disagreed.
void remarkConflicts(Operation *op, const FactorShardings &factors) {
  for (const FactorShardings::Conflict &conflict : factors.getConflicts())
    op->emitRemark() << "conflicting shardings of factor #" << conflict.factor
                     << ": kept " << describeAxes(conflict.kept.axes)
                     << " over " << describeAxes(conflict.dropped.axes)
                     << "; tensors that disagree are resharded";
}

/// Infers the unknown shardings of `op`'s tensors from its known ones.
/// Returns failure on two conflicting user annotations.
FailureOr<bool> propagateThrough(ShardingRuleOpInterface op,
                                 PropagationState &state, bool remark) {
  // A reshard between two annotated layouts is the user asking for the
  // change: there is nothing to infer and no conflict.
  if (isa<ReshardOp>(op) && state.fixed.contains(op->getOperand(0)) &&
      state.fixed.contains(op->getResult(0)))
    return false;
  ShardingRule rule = op.getShardingRule();
  FactorShardings factors(rule);
  bool anyKnown = false;
  auto mergeAll = [&](ValueRange values,
                      ArrayRef<ShardingRule::TensorDims> dims, bool isResult) {
    for (auto [value, tensorDims] : llvm::zip(values, dims)) {
      ShardingAttr sharding = state.known.lookup(value);
      if (!sharding)
        continue;
      anyKnown = true;
      factors.merge(tensorDims, sharding, state.fixed.contains(value),
                    isResult);
    }
  };
  mergeAll(op->getResults(), rule.results, /*isResult=*/true);
  mergeAll(op->getOperands(), rule.operands, /*isResult=*/false);
  if (factors.hasFixedConflict())
    return op->emitError("conflicting user shardings: ")
           << "factor #" << factors.getConflicts().back().factor
           << " is annotated "
           << describeAxes(factors.getConflicts().back().kept.axes) << " and "
           << describeAxes(factors.getConflicts().back().dropped.axes);
  if (!anyKnown)
    return false;
  // A reshard exists to change a layout: its operand and result differing
  // is no conflict.
  if (remark && !isa<ReshardOp>(op))
    remarkConflicts(op, factors);

  bool changed = false;
  auto inferAll = [&](ValueRange values,
                      ArrayRef<ShardingRule::TensorDims> dims, bool isResult) {
    for (auto [value, tensorDims] : llvm::zip(values, dims)) {
      if (!isTensor(value) || state.known.count(value))
        continue;
      state.known[value] = factors.build(state.mesh, tensorDims, isResult);
      LLVM_DEBUG(llvm::dbgs() << "inferred " << state.known[value] << " for "
                              << value << "\n");
      changed = true;
    }
  };
  inferAll(op->getResults(), rule.results, /*isResult=*/true);
  inferAll(op->getOperands(), rule.operands, /*isResult=*/false);
  return changed;
}

/// An op without a sharding rule (one no interface model covers) runs
/// replicated: its tensor operands must be whole, and its results are. Fails
/// at the first op with a split or partial operand; remarks the others, as
/// a replicated op in a partitioned program is work every rank repeats.
LogicalResult checkOpsWithoutRule(ModuleOp module,
                                  const PropagationState &state) {
  WalkResult result = module.walk([&](Operation *op) {
    if (isa<ShardingRuleOpInterface, func::FuncOp>(op) ||
        op->hasTrait<OpTrait::IsTerminator>() ||
        op->getParentOfType<ShardingRuleOpInterface>() ||
        !llvm::any_of(llvm::concat<Value>(op->getOperands(), op->getResults()),
                      isTensor))
      return WalkResult::advance();
    for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
      ShardingAttr sharding = state.known.lookup(operand);
      if (!sharding || sharding.isReplicated())
        continue;
      op->emitError() << "'" << op->getName()
                      << "' has no sharding rule, so it runs replicated, but "
                         "its operand #"
                      << index << " is " << sharding;
      return WalkResult::interrupt();
    }
    op->emitRemark() << "'" << op->getName()
                     << "' has no sharding rule: it runs replicated";
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

/// Seeds the state with every annotation; all must name one mesh.
LogicalResult seed(ModuleOp module, PropagationState &state) {
  auto record = [&](Value value, ShardingAttr sharding,
                    Operation *anchor) -> LogicalResult {
    if (!sharding)
      return success();
    if (state.mesh && state.mesh != sharding.getMesh())
      return anchor->emitError("shardings name two meshes, ")
             << state.mesh << " and " << sharding.getMesh()
             << "; propagation works on one";
    state.mesh = sharding.getMesh();
    state.known[value] = sharding;
    state.fixed.insert(value);
    return success();
  };
  WalkResult result = module.walk([&](Operation *op) {
    if (auto function = dyn_cast<func::FuncOp>(op)) {
      if (function.isExternal())
        return WalkResult::advance();
      for (BlockArgument arg : function.getArguments())
        if (failed(record(arg, getSharding(arg), op)))
          return WalkResult::interrupt();
      return WalkResult::advance();
    }
    if (op->getNumResults() == 1 &&
        failed(record(op->getResult(0), getSharding(op->getResult(0)), op)))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

struct PropagatePass
    : public megatron::impl::PropagateBase<PropagatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyGlobalProgram(module, getArgument(),
                                   ProgramDialects::TPAndLinalg)))
      return signalPassFailure();
    PropagationState state;
    if (failed(seed(module, state)))
      return signalPassFailure();
    if (!state.mesh)
      return; // Nothing is annotated: the program stays as it is.

    SmallVector<ShardingRuleOpInterface> ops;
    module.walk([&](ShardingRuleOpInterface op) { ops.push_back(op); });
    // Forward and backward sweeps until nothing changes; every sweep that
    // changes something fixes at least one more value, so this terminates.
    for (bool changed = true; changed;) {
      changed = false;
      for (bool forward : {true, false}) {
        for (size_t i = 0; i < ops.size(); ++i) {
          ShardingRuleOpInterface op = ops[forward ? i : ops.size() - 1 - i];
          FailureOr<bool> result =
              propagateThrough(op, state, /*remark=*/false);
          if (failed(result))
            return signalPassFailure();
          changed |= *result;
        }
      }
    }
    // Report the conflicts of the final state once per op.
    for (ShardingRuleOpInterface op : ops)
      (void)propagateThrough(op, state, /*remark=*/true);
    if (failed(checkOpsWithoutRule(module, state)))
      return signalPassFailure();

    module.walk([&](func::FuncOp function) {
      if (function.isExternal())
        return;
      for (BlockArgument arg : function.getArguments())
        if (isTensor(arg))
          setSharding(arg, lookupOrReplicated(state, arg));
      function.walk([&](Operation *op) {
        if (op->getNumResults() == 1 && isTensor(op->getResult(0)))
          setSharding(op->getResult(0),
                      lookupOrReplicated(state, op->getResult(0)));
      });
    });
  }

  static ShardingAttr lookupOrReplicated(PropagationState &state,
                                         Value value) {
    if (ShardingAttr sharding = state.known.lookup(value))
      return sharding;
    return getReplicated(state.mesh, value.getType());
  }
};

} // namespace
