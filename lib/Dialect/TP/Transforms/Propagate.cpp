//===- Propagate.cpp - complete shardings from a few annotations ----------===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Debug.h"

#include <deque>

#define DEBUG_TYPE "tp-propagate"

namespace mlir::megatron {
#define GEN_PASS_DEF_PROPAGATE
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

/// Shardings known so far; user annotations are fixed.
struct PropagationState {
  DenseMap<Value, ShardingAttr> known;
  DenseSet<Value> fixed;
  FlatSymbolRefAttr mesh;
  /// The mesh `mesh` names (null where the module does not declare it: the
  /// shardings' own verifier reports that).
  MeshOp meshOp;
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

/// How far propagation may infer. Splits: only tensors whose every factor
/// is known and that come out split or partial, so that what the
/// annotations decide spreads before anything is taken as unsplit (a
/// backward GEMM meeting its replicated cotangent before its split weight
/// would otherwise replicate both, and a whole layout asked for at the end
/// would undo the split one asked for at the start). Partial: the unknown
/// factors unsplit and replicated layouts too.
enum class Inference { Splits, Partial };

/// Infers the unknown shardings of `op`'s tensors from its known ones under
/// `rule` (the op's), appending each value it infers to `inferred`. Returns
/// failure on two conflicting user annotations.
LogicalResult propagateThrough(ShardingRuleOpInterface op,
                               const ShardingRule &rule,
                               PropagationState &state, bool remark,
                               Inference inference,
                               SmallVectorImpl<Value> &inferred) {
  // A reshard between two annotated layouts is the user asking for the
  // change: there is nothing to infer and no conflict.
  if (isa<ReshardOp>(op) && state.fixed.contains(op->getOperand(0)) &&
      state.fixed.contains(op->getResult(0)))
    return success();
  FactorShardings factors(rule, state.meshOp);
  bool anyKnown = false;
  auto mergeAll = [&](ValueRange values,
                      ArrayRef<ShardingRule::TensorDims> dims, bool isResult,
                      bool fixed) {
    for (auto [value, tensorDims] : llvm::zip(values, dims)) {
      ShardingAttr sharding = state.known.lookup(value);
      if (!sharding || state.fixed.contains(value) != fixed)
        continue;
      anyKnown = true;
      factors.merge(tensorDims, sharding, fixed, isResult);
    }
  };
  // Annotations first: what they split, inferred layouts then agree with
  // or give way to.
  for (bool fixed : {true, false}) {
    mergeAll(op->getResults(), rule.results, /*isResult=*/true, fixed);
    mergeAll(op->getOperands(), rule.operands, /*isResult=*/false, fixed);
  }
  if (factors.hasFixedConflict())
    return op->emitError("conflicting user shardings: ")
           << "factor #" << factors.getConflicts().back().factor
           << " is annotated "
           << describeAxes(factors.getConflicts().back().kept.axes) << " and "
           << describeAxes(factors.getConflicts().back().dropped.axes);
  if (!anyKnown)
    return success();
  // A reshard exists to change a layout: its operand and result differing
  // is no conflict.
  if (remark && !isa<ReshardOp>(op))
    remarkConflicts(op, factors);

  auto inferAll = [&](ValueRange values,
                      ArrayRef<ShardingRule::TensorDims> dims, bool isResult) {
    for (auto [value, tensorDims] : llvm::zip(values, dims)) {
      if (!isTensor(value) || state.known.count(value))
        continue;
      if (inference == Inference::Splits &&
          !factors.determines(tensorDims, isResult))
        continue;
      ShardingAttr sharding = factors.build(state.mesh, tensorDims, isResult);
      if (inference == Inference::Splits && sharding.isReplicated())
        continue;
      state.known[value] = sharding;
      LLVM_DEBUG(llvm::dbgs() << "inferred " << sharding << " for " << value
                              << "\n");
      inferred.push_back(value);
    }
  };
  inferAll(op->getResults(), rule.results, /*isResult=*/true);
  inferAll(op->getOperands(), rule.operands, /*isResult=*/false);
  return success();
}

/// The ops with a sharding rule, in program order, their rules (computed
/// once) and a worklist of those to revisit.
class Propagation {
public:
  Propagation(ModuleOp module, PropagationState &state) : state(state) {
    module.walk([&](ShardingRuleOpInterface op) {
      position[op] = ops.size();
      ops.push_back(op);
      rules.push_back(op.getShardingRule());
    });
  }

  /// Split inference until nothing changes; then the first op, in program
  /// order, that partial inference teaches something, and splits again.
  /// Taking unknown factors as unsplit one op at a time lets what the
  /// annotations decide spread first, and the op nearest the inputs (a
  /// layer norm of an unannotated input) is the one that guesses.
  LogicalResult run() {
    for (size_t i = 0; i < ops.size(); ++i)
      enqueue(i);
    size_t cursor = 0;
    while (true) {
      if (failed(drain()))
        return failure();
      std::optional<size_t> guessed;
      for (size_t scanned = 0; scanned < ops.size() && !guessed; ++scanned) {
        size_t i = (cursor + scanned) % ops.size();
        SmallVector<Value> inferred;
        if (failed(propagateThrough(ops[i], rules[i], state, /*remark=*/false,
                                    Inference::Partial, inferred)))
          return failure();
        if (!inferred.empty()) {
          guessed = i;
          enqueueNeighbours(inferred);
        }
      }
      if (!guessed)
        return success();
      cursor = *guessed;
    }
  }

  /// Remarks the conflicts of the final state, once per op.
  void remarkConflicts() {
    for (size_t i = 0; i < ops.size(); ++i) {
      SmallVector<Value> inferred;
      (void)propagateThrough(ops[i], rules[i], state, /*remark=*/true,
                             Inference::Partial, inferred);
    }
  }

private:
  void enqueue(size_t i) {
    if (!queued.insert(i).second)
      return;
    worklist.push_back(i);
  }

  /// The ops that read or define each newly inferred value.
  void enqueueNeighbours(ArrayRef<Value> inferred) {
    for (Value value : inferred) {
      auto visit = [&](Operation *op) {
        auto found = position.find(op);
        if (found != position.end())
          enqueue(found->second);
      };
      if (Operation *defining = value.getDefiningOp())
        visit(defining);
      for (Operation *user : value.getUsers())
        visit(user);
    }
  }

  /// Split inference over the worklist until it is empty; each visit that
  /// changes something fixes one more value, so it ends.
  LogicalResult drain() {
    while (!worklist.empty()) {
      size_t i = worklist.front();
      worklist.pop_front();
      queued.erase(i);
      SmallVector<Value> inferred;
      if (failed(propagateThrough(ops[i], rules[i], state, /*remark=*/false,
                                  Inference::Splits, inferred)))
        return failure();
      enqueueNeighbours(inferred);
    }
    return success();
  }

  PropagationState &state;
  SmallVector<ShardingRuleOpInterface> ops;
  std::vector<ShardingRule> rules;
  DenseMap<Operation *, size_t> position;
  std::deque<size_t> worklist;
  DenseSet<size_t> queued;
};

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
    state.meshOp = SymbolTable::lookupNearestSymbolFrom<MeshOp>(module,
                                                                state.mesh);

    Propagation propagation(module, state);
    if (failed(propagation.run()))
      return signalPassFailure();
    propagation.remarkConflicts();
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
