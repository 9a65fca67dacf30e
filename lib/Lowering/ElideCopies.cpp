//===- ElideCopies.cpp - compute into the view a buffer is copied to ------===//
//
// A layer rolled into a loop (tp-roll-layers) writes each activation it
// saves and each gradient it computes into its slot of a stack. The runtime
// calls that compute them write into a buffer of their own, which
// bufferization then copies into the slot: at GPT-2 124M about 400 MB of
// copies a training step, a pass over memory the step does not need. When
// nothing else touches the slot's buffer between the allocation and the
// copy, the buffer can be the slot itself.
//
//===----------------------------------------------------------------------===//
#include "megatron/Lowering/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_ELIDECOPIES
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

/// The buffer `view` is a view of: followed through views to an allocation
/// or a block argument.
Value rootBuffer(Value view) {
  while (auto viewLike = view.getDefiningOp<ViewLikeOpInterface>())
    view = viewLike.getViewSource();
  return view;
}

/// `root` and every value computed from it, transitively: its views, and
/// the results of anything that reads them (a started collective's ticket,
/// which its wait then reads).
llvm::SetVector<Value> derivedValues(Value root) {
  llvm::SetVector<Value> derived;
  derived.insert(root);
  for (unsigned i = 0; i < derived.size(); ++i)
    for (Operation *user : derived[i].getUsers())
      for (Value result : user->getResults())
        derived.insert(result);
  return derived;
}

/// Whether an op in [first, last) of one block, or nested in one, touches
/// memory through a value derived from `root`. A view of it touches
/// nothing: it is only an address.
bool touchedBetween(Value root, Operation *first, Operation *last) {
  llvm::SetVector<Value> derived = derivedValues(root);
  for (Operation *op = first; op != last; op = op->getNextNode()) {
    WalkResult walk = op->walk([&](Operation *nested) {
      if (isMemoryEffectFree(nested))
        return WalkResult::advance();
      for (Value operand : nested->getOperands())
        if (derived.contains(operand))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return true;
  }
  return false;
}

/// Whether the buffer argument `arg` of `fn` may be the same memory as
/// another argument: a caller passes views of one buffer for both. A
/// function nothing in the module calls is an entry, which the runtime
/// calls with a buffer of its own for each argument.
bool mayAliasAnotherArgument(BlockArgument arg, func::FuncOp fn) {
  auto module = fn->getParentOfType<ModuleOp>();
  std::optional<SymbolTable::UseRange> uses =
      SymbolTable::getSymbolUses(fn, module);
  if (!uses)
    return true;
  for (const SymbolTable::SymbolUse &use : *uses) {
    auto call = dyn_cast<func::CallOp>(use.getUser());
    if (!call)
      return true;
    Value passed = rootBuffer(call.getOperand(arg.getArgNumber()));
    for (auto [k, other] : llvm::enumerate(call.getOperands()))
      if (k != arg.getArgNumber() && isa<BaseMemRefType>(other.getType()) &&
          rootBuffer(other) == passed)
        return true;
  }
  return false;
}

/// The type `op`'s result takes when its source becomes `source`, for the
/// views that keep an address computation the buffer's layout decides.
FailureOr<MemRefType> retypedView(Operation *op, MemRefType source) {
  if (auto collapse = dyn_cast<memref::CollapseShapeOp>(op)) {
    if (!memref::CollapseShapeOp::isGuaranteedCollapsible(
            source, collapse.getReassociationIndices()))
      return failure();
    return memref::CollapseShapeOp::computeCollapsedType(
        source, collapse.getReassociationIndices());
  }
  if (auto expand = dyn_cast<memref::ExpandShapeOp>(op))
    return memref::ExpandShapeOp::computeExpandedType(
        source, expand.getResultType().getShape(),
        expand.getReassociationIndices());
  return failure();
}

/// Whether every use of `buffer` also holds for a buffer of the same shape
/// with the layout of `to`: layout-agnostic ops, casts to a type `to` casts
/// to, and views whose results hold in turn. `except` (the copy to be
/// elided and the free) is not asked.
bool usesTakeLayout(Value buffer, MemRefType to,
                    ArrayRef<Operation *> except) {
  for (Operation *user : buffer.getUsers()) {
    if (llvm::is_contained(except, user) ||
        isa<linalg::LinalgOp, memref::CopyOp>(user))
      continue;
    if (auto cast = dyn_cast<memref::CastOp>(user)) {
      if (!memref::CastOp::areCastCompatible(to, cast.getType()))
        return false;
      continue;
    }
    FailureOr<MemRefType> viewType = retypedView(user, to);
    if (failed(viewType) ||
        !usesTakeLayout(user->getResult(0), *viewType, {}))
      return false;
  }
  return true;
}

/// Makes every use of `buffer` use `replacement`, rebuilding the views
/// (usesTakeLayout said which) with the types its layout gives them.
void replaceWithLayout(Value buffer, Value replacement) {
  auto type = cast<MemRefType>(replacement.getType());
  for (OpOperand &use : llvm::make_early_inc_range(buffer.getUses())) {
    Operation *user = use.getOwner();
    FailureOr<MemRefType> viewType = retypedView(user, type);
    if (failed(viewType)) {
      use.set(replacement);
      continue;
    }
    OpBuilder builder(user);
    Operation *view = builder.clone(*user);
    view->setOperand(0, replacement);
    view->getResult(0).setType(*viewType);
    replaceWithLayout(user->getResult(0), view->getResult(0));
    user->erase();
  }
}

/// Collects in `toMove`, operands first, the pure ops of `point`'s block
/// after it that compute `value` (a view of a stack, its slot index), so
/// that moving them before `point` makes `value` available there; fails
/// when something else would have to move.
bool hoistBefore(Value value, Operation *point, DominanceInfo &dominance,
                 SmallVectorImpl<Operation *> &toMove) {
  if (dominance.properlyDominates(value, point))
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != point->getBlock() || !isPure(def) ||
      def->getNumRegions() != 0)
    return false;
  for (Value operand : def->getOperands())
    if (!hoistBefore(operand, point, dominance, toMove))
      return false;
  if (!llvm::is_contained(toMove, def))
    toMove.push_back(def);
  return true;
}

/// `memref.copy %a, %view` where %a is allocated in the copy's block, only
/// computed before the copy and freed after it: %a becomes %view, when
/// nothing else reads or writes %view's buffer in between and every use of
/// %a takes %view's layout.
LogicalResult elide(memref::CopyOp copy, DominanceInfo &dominance) {
  auto alloc = copy.getSource().getDefiningOp<memref::AllocOp>();
  Value target = copy.getTarget();
  auto targetType = dyn_cast<MemRefType>(target.getType());
  if (!alloc || alloc->getBlock() != copy->getBlock() || !targetType ||
      !alloc.getType().hasStaticShape() ||
      alloc.getType().getShape() != targetType.getShape() ||
      alloc.getType().getMemorySpace() != targetType.getMemorySpace())
    return failure();

  SmallVector<Operation *> frees;
  for (Operation *user : alloc->getUsers()) {
    Operation *inBlock = copy->getBlock()->findAncestorOpInBlock(*user);
    if (!inBlock)
      return failure();
    if (isa<memref::DeallocOp>(user) && copy->isBeforeInBlock(user))
      frees.push_back(user);
    else if (user != copy && !inBlock->isBeforeInBlock(copy))
      return failure();
  }
  SmallVector<Operation *> except(frees);
  except.push_back(copy);
  if (!usesTakeLayout(alloc, targetType, except))
    return failure();

  Value root = rootBuffer(target);
  if (auto arg = dyn_cast<BlockArgument>(root)) {
    auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!fn || arg.getOwner() != &fn.getBody().front() ||
        mayAliasAnotherArgument(arg, fn))
      return failure();
  }
  if (touchedBetween(root, alloc, copy))
    return failure();
  SmallVector<Operation *> toMove;
  if (!hoistBefore(target, alloc, dominance, toMove))
    return failure();

  for (Operation *op : toMove)
    op->moveBefore(alloc);
  copy->erase();
  for (Operation *free : frees)
    free->erase();
  replaceWithLayout(alloc, target);
  alloc->erase();
  return success();
}

struct ElideCopiesPass
    : public megatron::impl::ElideCopiesBase<ElideCopiesPass> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp copy) { copies.push_back(copy); });
    DominanceInfo dominance(getOperation());
    for (memref::CopyOp copy : copies)
      (void)elide(copy, dominance);
  }
};

} // namespace
