//===- InsertConjugates.cpp - Megatron's f and g where shardings change ---===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tp-insert-conjugates"

namespace mlir::megatron {
#define GEN_PASS_DEF_INSERTCONJUGATES
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

bool isSplitting(MeshOp mesh, StringRef axis) {
  return mesh.getAxisSize(axis).value_or(1) > 1;
}

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
  for (StringRef axis : sharding.getPartialAxes()) {
    if (!isSplitting(mesh, axis))
      continue;
    value = GOp::create(b, loc, value, FlatSymbolRefAttr::get(mesh),
                        b.getStringAttr(axis));
    LLVM_DEBUG(llvm::dbgs() << "g over " << axis << " at " << loc << "\n");
    setSharding(value, withoutPartial(sharding));
  }
  if (value != partial)
    completed[partial] = value;
  return value;
}

/// The mesh axes over which `op`'s results are split or partial.
SmallVector<StringRef> resultAxes(Operation *op, MeshOp mesh) {
  SmallVector<StringRef> axes;
  for (Value result : op->getResults())
    if (ShardingAttr sharding = getSharding(result))
      for (StringRef axis : mesh.getAxisNames().getAsValueRange<StringAttr>())
        if (isSplitting(mesh, axis) && sharding.usesAxis(axis) &&
            !llvm::is_contained(axes, axis))
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

/// Gives operand `index` of `op` the layout the op's rule requires.
void conjugateOperand(OpBuilder &b, Operation *op, unsigned index,
                      const ShardingRule &rule, const FactorShardings &factors,
                      MeshOp mesh, SharedConjugates &shared,
                      CompletedSums &completed) {
  auto meshRef = FlatSymbolRefAttr::get(mesh);
  Value value = op->getOperand(index);
  // Scalars (a fill's value, a dynamic size) have no layout.
  if (!isa<RankedTensorType>(value.getType()))
    return;
  b.setInsertionPoint(op);
  if (!rule.consumesPartial)
    value = completePartialSums(b, op->getLoc(), value, mesh, completed, op);
  ShardingAttr actual = shardingOrReplicated(value, meshRef);
  ShardingAttr required =
      factors.build(meshRef, rule.operands[index], /*isResult=*/false);
  if (!rule.consumesPartial && !sameLayout(actual, required, mesh)) {
    value = ReshardOp::create(b, op->getLoc(), value);
    setSharding(value, required);
    actual = required;
  }
  if (isa<FloatType>(getElementTypeOrSelf(value.getType())) &&
      isa<VJPOpInterface>(op)) {
    // A whole value entering an op whose results are split or partial over
    // an axis (resharded to whole or not): its gradient will be partial over
    // that axis, which f's backward all-reduce completes. Only tp-autodiff's
    // backward needs it: an op without a VJP (a framework's linalg, whose
    // backward the framework wrote) has none.
    SmallVector<StringRef> axes;
    for (StringRef axis : resultAxes(op, mesh))
      if (!required.usesAxis(axis))
        axes.push_back(axis);
    value = conjugate(b, op, value, axes, meshRef, actual, shared);
  }
  op->setOperand(index, value);
}

/// Where an annotated result differs from what the op computes under its
/// factors (a pinned whole result of a GEMM whose contraction is split), the
/// op keeps the layout it computes and g or a reshard after it gives users
/// the annotated one.
void conjugateResults(OpBuilder &b, Operation *op, const ShardingRule &rule,
                      const FactorShardings &factors, MeshOp mesh,
                      CompletedSums &completed) {
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
    Value value = result;
    if (annotated.getPartialAxes().empty())
      value = completePartialSums(b, op->getLoc(), value, mesh, completed, op);
    if (!sameLayout(annotated, shardingOrReplicated(value, meshRef), mesh)) {
      value = ReshardOp::create(b, op->getLoc(), value);
      setSharding(value, annotated);
    }
    result.replaceAllUsesExcept(value, value.getDefiningOp());
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
    SmallVector<ShardingRuleOpInterface> ops;
    module.walk([&](ShardingRuleOpInterface op) {
      // Conjugates and reshards are what this pass inserts.
      if (!isa<FOp, GOp, ReshardOp>(op))
        ops.push_back(op);
    });
    for (ShardingRuleOpInterface op : ops) {
      ShardingAttr anySharding = findSharding(op);
      if (!anySharding)
        continue;
      auto mesh =
          symbols.lookupNearestSymbolFrom<MeshOp>(op, anySharding.getMesh());
      ShardingRule rule = op.getShardingRule();
      FactorShardings factors(rule);
      for (auto [value, dims] : llvm::zip(op->getResults(), rule.results))
        if (ShardingAttr sharding = getSharding(value))
          factors.merge(dims, sharding, false, /*isResult=*/true);
      for (auto [value, dims] : llvm::zip(op->getOperands(), rule.operands))
        if (ShardingAttr sharding = getSharding(value))
          factors.merge(dims, sharding, false, /*isResult=*/false);
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        conjugateOperand(b, op, i, rule, factors, mesh, shared, completed);
      conjugateResults(b, op, rule, factors, mesh, completed);
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
