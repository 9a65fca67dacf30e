//===- InsertConjugates.cpp - Megatron's f and g where shardings change ---===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tp-insert-conjugates"

namespace mlir::megatron {
#define GEN_PASS_DEF_INSERTCONJUGATES
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

ShardingAttr shardingOrReplicated(Value value, FlatSymbolRefAttr mesh) {
  if (ShardingAttr sharding = getSharding(value))
    return sharding;
  return getReplicated(mesh, value.getType());
}

/// The complete value of each partial sum already completed, by the
/// partial value: its other users in the same block share the tp.g rather
/// than all-reducing it again.
using CompletedSums = DenseMap<Value, Value>;

/// Completes each pending partial sum of `value` with a tp.g, at `b`'s
/// insertion point, for `user`; reuses an earlier completion in `user`'s
/// block.
Value completePartialSums(OpBuilder &b, Location loc, Value value,
                          MeshOp mesh, CompletedSums &completed,
                          Operation *user) {
  Value &earlier = completed[value];
  if (earlier && earlier.getDefiningOp()->getBlock() == user->getBlock() &&
      earlier.getDefiningOp()->isBeforeInBlock(user))
    return earlier;
  Value partial = value;
  ShardingAttr sharding = shardingOrReplicated(value, FlatSymbolRefAttr::get(mesh));
  for (StringRef axis : mesh.canonicalAxes(
           splittingSubAxes(sharding.getPartialAxes(), mesh))) {
    value = GOp::create(b, loc, value, FlatSymbolRefAttr::get(mesh),
                        b.getStringAttr(axis));
    LLVM_DEBUG(llvm::dbgs() << "g over " << axis << " at " << loc << "\n");
    setSharding(value, withoutPartial(sharding));
  }
  if (value != partial)
    completed[partial] = value;
  return value;
}

/// The (sub-)axes that split or leave partial any of `shardings`.
llvm::SmallSetVector<StringRef, 4> splittingAxesOf(ArrayRef<ShardingAttr> shardings,
                                                MeshOp mesh) {
  llvm::SmallSetVector<StringRef, 4> axes;
  for (ShardingAttr sharding : shardings) {
    if (!sharding)
      continue;
    auto add = [&](ArrayRef<StringRef> some) {
      SmallVector<StringRef> split = splittingSubAxes(some, mesh);
      axes.insert(split.begin(), split.end());
    };
    add(sharding.getPartialAxes());
    for (unsigned dim = 0, e = sharding.getDims().size(); dim < e; ++dim)
      add(sharding.getDimAxes(dim));
  }
  return axes;
}

bool isFunctionArgument(Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  return arg && isa<FunctionOpInterface>(arg.getOwner()->getParentOp());
}

/// An op's rule and what its tensors' shardings make of the rule's factors,
/// computed once for planning and inserting.
struct PlannedOp {
  PlannedOp(ShardingRuleOpInterface op, MeshOp mesh)
      : op(op), mesh(mesh), rule(op.getShardingRule()), factors(rule, mesh) {
    // An argument's sharding is an annotation (the user's or the
    // planner's): where its factor and another claim one axis, it keeps it.
    for (auto [value, dims] : llvm::zip(op->getResults(), rule.results))
      if (ShardingAttr sharding = getSharding(value))
        factors.merge(dims, sharding, false, /*isResult=*/true);
    for (auto [value, dims] : llvm::zip(op->getOperands(), rule.operands))
      if (ShardingAttr sharding = getSharding(value))
        factors.merge(dims, sharding, isFunctionArgument(value),
                      /*isResult=*/false);
  }
  ShardingAttr required(unsigned index) const {
    return factors.build(FlatSymbolRefAttr::get(mesh), rule.operands[index],
                         /*isResult=*/false);
  }

  ShardingRuleOpInterface op;
  MeshOp mesh;
  ShardingRule rule;
  FactorShardings factors;
};

/// The sub-axes, in the mesh's order, over which the results of `planned`'s
/// op are split or partial as it computes them (and `extra`, the f's moved
/// up to its operands), but `required` (an operand's layout) is not: what
/// an f on the operand reduces over. Where a result's users want another
/// layout (a g or a reshard after the op gives it them), that layout says
/// nothing of the op's own cotangents.
SmallVector<StringRef> neededSubAxes(const PlannedOp &planned,
                                     ShardingAttr required,
                                     ArrayRef<StringRef> extra = {}) {
  MeshOp mesh = planned.mesh;
  SmallVector<ShardingAttr> results;
  for (const ShardingRule::TensorDims &dims : planned.rule.results)
    results.push_back(planned.factors.build(FlatSymbolRefAttr::get(mesh),
                                            dims, /*isResult=*/true));
  llvm::SmallSetVector<StringRef, 4> split = splittingAxesOf(results, mesh);
  split.insert(extra.begin(), extra.end());
  llvm::SmallSetVector<StringRef, 4> covered =
      splittingAxesOf({required}, mesh);
  SmallVector<StringRef> axes;
  for (StringRef axis :
       mesh.expandAxes(llvm::to_vector(
           mesh.getAxisNames().getAsValueRange<StringAttr>())))
    if (split.contains(axis) && !covered.contains(axis))
      axes.push_back(axis);
  return axes;
}

/// The f over `axis` of each value, shared by all its uses: its VJP then
/// all-reduces the value's whole gradient once, after tp-autodiff has summed
/// the uses' cotangents (a tied embedding's two uses, a parameter's
/// data-parallel reduction, the one normalised activation Llama's separate
/// q, k and v projections all read). Keyed by the value and the axes, in
/// order ("dp,tp"), of its f's.
using SharedConjugates = DenseMap<std::pair<Value, StringAttr>, Value>;

/// `value` through an f over each of `axes`: one chain right after the
/// value is defined (at the function's start for an argument) that every
/// use shares.
Value conjugate(OpBuilder &b, Operation *op, Value value,
                ArrayRef<StringRef> axes, FlatSymbolRefAttr mesh,
                ShardingAttr sharding, SharedConjugates &shared) {
  if (axes.empty())
    return value;
  Value &cached = shared[{value, b.getStringAttr(llvm::join(axes, ","))}];
  if (cached)
    return cached;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(value);
  auto arg = dyn_cast<BlockArgument>(value);
  for (StringRef axis : axes) {
    LLVM_DEBUG(llvm::dbgs() << "f over " << axis << " for " << op->getName()
                            << " at " << op->getLoc() << "\n");
    value = FOp::create(b, arg ? arg.getLoc() : op->getLoc(), value, mesh,
                        b.getStringAttr(axis));
    setSharding(value, sharding);
  }
  cached = value;
  return value;
}

/// The f's moved up from a value to the operands of the op that made it:
/// the operands that need no f of their own, and the sub-axes the f's of
/// each op's operands take on.
struct MovedConjugates {
  DenseSet<std::pair<Operation *, unsigned>> operands;
  DenseMap<Operation *, SmallVector<StringRef>> extra;
};

bool isFloatTensor(Value value) {
  return isa<RankedTensorType>(value.getType()) &&
         isa<FloatType>(getElementTypeOrSelf(value.getType()));
}

/// Whether operand `index` of `planned` already has the layout its op
/// requires, complete: no reshard or g comes between, so an f may move.
bool fitsAsIs(const PlannedOp &planned, unsigned index) {
  Value value = planned.op->getOperand(index);
  ShardingAttr actual =
      shardingOrReplicated(value, FlatSymbolRefAttr::get(planned.mesh));
  return splittingSubAxes(actual.getPartialAxes(), planned.mesh).empty() &&
         sameLayout(actual, planned.required(index), planned.mesh);
}

/// What planning moves reads: each op's plan, and the f's each value gets
/// where nothing moves (by their axes, "tp_kv,tp_rep" spelled "tp").
struct MovePlanning {
  DenseMap<Operation *, const PlannedOp *> planned;
  DenseMap<Value, llvm::StringSet<>> chains;

  bool hasChain(Value value, ArrayRef<StringRef> axes, MeshOp mesh) const {
    auto found = chains.find(value);
    return found != chains.end() &&
           found->second.contains(llvm::join(mesh.canonicalAxes(axes), ","));
  }
};

int64_t elementsOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getNumElements();
}

/// The elements of the collectives that moving the f over `axes` that
/// `value` needs up to the operands of the op that made it adds, less those
/// it saves; nullopt where it cannot move. The op's VJP is linear in the
/// cotangent, and where its operands are the same on every rank of `axes`
/// (whole there), the VJP is the same map on each: summing the cotangent
/// over `axes` before it or the operands' cotangents after it is the same
/// sum. An operand that another use already gives an f over the union
/// joins that f (saving its own, if it had one); one with an f of its own
/// has it take the axes on; a parameter gains an f (its gradient reduced
/// once per step); any other operand passes the f on in turn. The
/// value's one use must be the one that needs the f.
std::optional<int64_t> moveCost(Value value, ArrayRef<StringRef> axes,
                                const MovePlanning &planning) {
  Operation *producer = value.getDefiningOp();
  const PlannedOp *maker =
      producer ? planning.planned.lookup(producer) : nullptr;
  if (!maker || !value.hasOneUse() || !isa<VJPOpInterface>(producer))
    return std::nullopt;
  int64_t cost = 0;
  for (auto [index, operand] : llvm::enumerate(producer->getOperands())) {
    if (!isFloatTensor(operand))
      continue;
    if (!fitsAsIs(*maker, index))
      return std::nullopt;
    ShardingAttr layout = maker->required(index);
    llvm::SmallSetVector<StringRef, 4> split =
        splittingAxesOf({layout}, maker->mesh);
    if (llvm::any_of(axes, [&](StringRef axis) { return split.contains(axis); }))
      return std::nullopt;
    SmallVector<StringRef> own = neededSubAxes(*maker, layout);
    SmallVector<StringRef> merged =
        neededSubAxes(*maker, layout, axes);
    if (planning.hasChain(operand, merged, maker->mesh)) {
      if (!own.empty())
        cost -= elementsOf(operand);
      continue;
    }
    if (!own.empty())
      continue;
    if (isFunctionArgument(operand)) {
      cost += elementsOf(operand);
      continue;
    }
    std::optional<int64_t> passed = moveCost(operand, axes, planning);
    if (!passed)
      return std::nullopt;
    cost += *passed;
  }
  return cost;
}

/// Decides, users before producers, which f's move up: those whose move
/// costs fewer elements than the value's own f (moveCost).
MovedConjugates planMoves(ArrayRef<std::unique_ptr<PlannedOp>> ops) {
  MovePlanning planning;
  for (const std::unique_ptr<PlannedOp> &op : ops) {
    planning.planned[op->op] = op.get();
    if (!isa<VJPOpInterface>(op->op.getOperation()))
      continue;
    for (auto [index, operand] : llvm::enumerate(op->op->getOperands()))
      if (isFloatTensor(operand)) {
        SmallVector<StringRef> axes =
            neededSubAxes(*op, op->required(index));
        if (!axes.empty())
          planning.chains[operand].insert(
              llvm::join(op->mesh.canonicalAxes(axes), ","));
      }
  }
  MovedConjugates moves;
  for (const std::unique_ptr<PlannedOp> &user : llvm::reverse(ops)) {
    if (!isa<VJPOpInterface>(user->op.getOperation()))
      continue;
    for (auto [index, operand] : llvm::enumerate(user->op->getOperands())) {
      if (!isFloatTensor(operand) || !fitsAsIs(*user, index))
        continue;
      SmallVector<StringRef> axes =
          neededSubAxes(*user, user->required(index),
                        moves.extra.lookup(user->op));
      if (axes.empty())
        continue;
      std::optional<int64_t> cost = moveCost(operand, axes, planning);
      if (!cost || *cost >= elementsOf(operand))
        continue;
      LLVM_DEBUG(llvm::dbgs() << "f over " << describeAxes(axes) << " for "
                              << user->op->getName() << " moves up\n");
      moves.operands.insert({user->op, static_cast<unsigned>(index)});
      SmallVector<StringRef> &extra = moves.extra[operand.getDefiningOp()];
      for (StringRef axis : axes)
        if (!llvm::is_contained(extra, axis))
          extra.push_back(axis);
    }
  }
  return moves;
}

/// Each value's reshard to a layout, shared by every use that needs that
/// layout (Llama's q, k and v projections read one normalised activation:
/// under sequence parallelism, one all-gather of it).
using SharedReshards = DenseMap<std::pair<Value, Attribute>, Value>;

/// `value` resharded to `layout`, right after it is defined.
Value reshard(OpBuilder &b, Value value, ShardingAttr layout,
              SharedReshards &shared) {
  Value &cached = shared[{value, layout}];
  if (cached)
    return cached;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(value);
  cached = ReshardOp::create(b, value.getLoc(), value);
  setSharding(cached, layout);
  return cached;
}

/// Gives operand `index` of `planned`'s op the layout the op's rule
/// requires, and its f unless that moved up.
void conjugateOperand(OpBuilder &b, const PlannedOp &planned, unsigned index,
                      const MovedConjugates &moves, SharedConjugates &shared,
                      SharedReshards &reshards, CompletedSums &completed) {
  Operation *op = planned.op;
  const ShardingRule &rule = planned.rule;
  MeshOp mesh = planned.mesh;
  auto meshRef = FlatSymbolRefAttr::get(mesh);
  Value value = op->getOperand(index);
  // Scalars (a fill's value, a dynamic size) have no layout.
  if (!isa<RankedTensorType>(value.getType()))
    return;
  b.setInsertionPoint(op);
  if (!rule.consumesPartial)
    value = completePartialSums(b, op->getLoc(), value, mesh, completed, op);
  ShardingAttr actual = shardingOrReplicated(value, meshRef);
  ShardingAttr required = planned.required(index);
  if (!rule.consumesPartial && !sameLayout(actual, required, mesh)) {
    value = reshard(b, value, required, reshards);
    actual = required;
  }
  if (isa<FloatType>(getElementTypeOrSelf(value.getType())) &&
      isa<VJPOpInterface>(op) && !moves.operands.contains({op, index})) {
    // A whole value entering an op whose results are split or partial over
    // an axis (resharded to whole or not): its gradient will be partial over
    // that axis, which f's backward all-reduce completes. Only tp-autodiff's
    // backward needs it: an op without a VJP (a framework's linalg, whose
    // backward the framework wrote) has none.
    SmallVector<StringRef> axes = mesh.canonicalAxes(
        neededSubAxes(planned, required, moves.extra.lookup(op)));
    value = conjugate(b, op, value, axes, meshRef, actual, shared);
  }
  op->setOperand(index, value);
}

/// Where an annotated result differs from what the op computes under its
/// factors (a pinned whole result of a GEMM whose contraction is split), the
/// op keeps the layout it computes and g or a reshard after it gives users
/// the annotated one.
void conjugateResults(OpBuilder &b, const PlannedOp &planned,
                      CompletedSums &completed) {
  Operation *op = planned.op;
  const ShardingRule &rule = planned.rule;
  const FactorShardings &factors = planned.factors;
  MeshOp mesh = planned.mesh;
  auto meshRef = FlatSymbolRefAttr::get(mesh);
  for (auto [result, dims] : llvm::zip(op->getResults(), rule.results)) {
    ShardingAttr annotated = getSharding(result);
    if (!annotated)
      continue;
    ShardingAttr computed = factors.build(meshRef, dims, /*isResult=*/true);
    if (sameLayout(annotated, computed, mesh))
      continue;
    setSharding(result, computed);
    b.setInsertionPointAfter(op);
    // The users before the g and reshard below, which themselves read it.
    SmallVector<OpOperand *> uses = llvm::to_vector(llvm::map_range(
        result.getUses(), [](OpOperand &use) { return &use; }));
    Value value = result;
    if (annotated.getPartialAxes().empty())
      value = completePartialSums(b, op->getLoc(), value, mesh, completed, op);
    if (!sameLayout(annotated, shardingOrReplicated(value, meshRef), mesh)) {
      value = ReshardOp::create(b, op->getLoc(), value);
      setSharding(value, annotated);
    }
    for (OpOperand *use : uses)
      use->set(value);
  }
}

struct InsertConjugatesPass
    : public megatron::impl::InsertConjugatesBase<InsertConjugatesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyGlobalProgram(module, getArgument(),
                                   ProgramDialects::TPAndLinalg)))
      return signalPassFailure();
    SymbolTableCollection symbols;
    OpBuilder b(&getContext());
    SharedConjugates shared;
    CompletedSums completed;
    SmallVector<std::unique_ptr<PlannedOp>> ops;
    module.walk([&](ShardingRuleOpInterface op) {
      // Conjugates and reshards are what this pass inserts.
      if (isa<FOp, GOp, ReshardOp>(op))
        return;
      ShardingAttr anySharding = findSharding(op);
      if (!anySharding)
        return;
      auto mesh =
          symbols.lookupNearestSymbolFrom<MeshOp>(op, anySharding.getMesh());
      ops.push_back(std::make_unique<PlannedOp>(op, mesh));
    });
    MovedConjugates moves = planMoves(ops);
    SharedReshards reshards;
    for (const std::unique_ptr<PlannedOp> &planned : ops) {
      for (unsigned i = 0; i < planned->op->getNumOperands(); ++i)
        conjugateOperand(b, *planned, i, moves, shared, reshards, completed);
      conjugateResults(b, *planned, completed);
    }
    // Results leave the function whole.
    module.walk([&](func::ReturnOp ret) {
      b.setInsertionPoint(ret);
      for (OpOperand &operand : ret->getOpOperands())
        if (ShardingAttr sharding = getSharding(operand.get()))
          if (auto mesh = symbols.lookupNearestSymbolFrom<MeshOp>(
                  ret, sharding.getMesh()))
            operand.set(completePartialSums(b, ret.getLoc(), operand.get(),
                                            mesh, completed, ret));
    });
  }

  static ShardingAttr findSharding(Operation *op) {
    for (Value value : llvm::concat<Value>(op->getResults(), op->getOperands()))
      if (ShardingAttr sharding = getSharding(value))
        return sharding;
    return {};
  }
};

} // namespace
