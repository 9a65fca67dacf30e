//===- OverlapCollectives.cpp - collectives in flight under compute -------===//
//
// Each all-reduce (and each fp32 reduce-scatter and all-gather by rows,
// ZeRO-1's gradient reduction and parameter gather) becomes a start as early
// as its inputs allow and a wait as late as its first use allows, without entering another layer's run (the
// calls tp-outline-layers makes); the compute between the two runs while the
// sum is in flight.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/Utils/LayerLocations.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_OVERLAPCOLLECTIVES
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

namespace {

/// A collective this pass can split: what it combines, how, over what,
/// and what it is: an all-reduce, or over rows (dimension 0) a
/// reduce-scatter or an all-gather.
struct Reduction {
  Operation *op;
  ValueRange inputs;
  ReductionKind kind;
  FlatSymbolRefAttr mesh;
  StringRef axis;
  CollectiveKind collective = CollectiveKind::all_reduce;
};

std::optional<Reduction> asReduction(Operation *op) {
  if (auto reduce = dyn_cast<AllReduceOp>(op))
    return Reduction{op, op->getOperands(), reduce.getKind(),
                     reduce.getMeshAttr(), reduce.getAxis()};
  if (auto g = dyn_cast<GOp>(op))
    return Reduction{op, op->getOperands(), ReductionKind::sum,
                     g.getMeshAttr(), g.getAxis()};
  if (auto bucket = dyn_cast<AllReduceBucketOp>(op))
    return Reduction{op, bucket.getInputs(), ReductionKind::sum,
                     bucket.getMeshAttr(), bucket.getAxis()};
  // A started reduce-scatter sums fp32 rows, what ZeRO-1's gradients are.
  if (auto bucket = dyn_cast<ReduceScatterBucketOp>(op))
    return Reduction{op, bucket.getInputs(), ReductionKind::sum,
                     bucket.getMeshAttr(), bucket.getAxis(),
                     CollectiveKind::reduce_scatter};
  if (auto scatter = dyn_cast<ReduceScatterOp>(op);
      scatter && scatter.getKind() == ReductionKind::sum &&
      scatter.getDim() == 0 &&
      getElementTypeOrSelf(scatter.getInput().getType()).isF32())
    return Reduction{op, op->getOperands(), ReductionKind::sum,
                     scatter.getMeshAttr(), scatter.getAxis(),
                     CollectiveKind::reduce_scatter};
  // ZeRO-1's updated rows, gathered back into their parameter.
  if (auto gather = dyn_cast<AllGatherOp>(op); gather && gather.getDim() == 0)
    return Reduction{op, op->getOperands(), ReductionKind::sum,
                     gather.getMeshAttr(), gather.getAxis(),
                     CollectiveKind::all_gather};
  return std::nullopt;
}

/// A one-element sum (the loss, the gradient norm) is a scalar the host
/// computes, which the runtime keeps out of buffers (on a GPU they live in
/// device memory), and costs a collective's latency alone: it stays a
/// blocking sum.
bool isHostScalar(Value value) {
  return cast<ShapedType>(value.getType()).getNumElements() == 1;
}

/// The run a position (before `at`) lies strictly inside: the ops on both
/// sides are of one layer and phase.
std::optional<RunKey> runAround(Block::iterator at) {
  Block *block = at->getBlock();
  if (at == block->begin())
    return std::nullopt;
  std::optional<RunKey> before = getRunKey(&*std::prev(at)),
                        after = getRunKey(&*at);
  return before == after ? before : std::nullopt;
}

/// Just after the last of `reduction`'s inputs this block defines, then
/// past the end of any run of another layer or phase it would cut.
Block::iterator earliestStart(const Reduction &reduction,
                              std::optional<RunKey> own) {
  Block *block = reduction.op->getBlock();
  Operation *last = nullptr;
  for (Value input : reduction.inputs)
    if (Operation *def = input.getDefiningOp())
      if (Operation *inBlock = block->findAncestorOpInBlock(*def))
        if (!last || last->isBeforeInBlock(inBlock))
          last = inBlock;
  Block::iterator at = last ? std::next(Block::iterator(last)) : block->begin();
  while (std::optional<RunKey> run = runAround(at))
    if (run == own)
      break;
    else
      ++at;
  return at;
}

/// Just before the first op that reads a sum, then back to the start of
/// any run of another layer or phase it would cut.
Block::iterator latestWait(const Reduction &reduction,
                           std::optional<RunKey> own) {
  Block *block = reduction.op->getBlock();
  Operation *first = block->getTerminator();
  for (Value result : reduction.op->getResults())
    for (Operation *user : result.getUsers())
      if (Operation *inBlock = block->findAncestorOpInBlock(*user))
        if (inBlock->isBeforeInBlock(first))
          first = inBlock;
  Block::iterator at(first);
  while (std::optional<RunKey> run = runAround(at))
    if (run == own)
      break;
    else
      --at;
  return at;
}

/// Whether anything between `from` and `to` does work the sum can hide
/// behind (the reduction itself aside).
bool hasWorkBetween(Block::iterator from, Block::iterator to,
                    Operation *reduction) {
  for (Block::iterator it = from; it != to; ++it)
    if (&*it != reduction &&
        (isa<func::CallOp>(*it) ||
         (isa<TPDialect>(it->getDialect()) && !isa<CollectiveOpInterface>(*it))))
      return true;
  return false;
}

/// A data-parallel sum belongs to no one layer: its halves stand between
/// runs, never in one.
bool isDataParallel(const Reduction &reduction) {
  return reduction.axis == MGT_AXIS_NAME_DP;
}

/// The start of `reduction`, at `b`'s insertion point.
Operation *startOf(OpBuilder &b, Location loc, const Reduction &reduction) {
  StringAttr axis = b.getStringAttr(reduction.axis);
  switch (reduction.collective) {
  case CollectiveKind::reduce_scatter:
    return ReduceScatterStartOp::create(b, loc, reduction.inputs,
                                        reduction.mesh, axis);
  case CollectiveKind::all_gather:
    return AllGatherStartOp::create(b, loc, reduction.inputs, reduction.mesh,
                                    axis);
  default:
    return AllReduceStartOp::create(
        b, loc, reduction.inputs,
        ReductionKindAttr::get(b.getContext(), reduction.kind), reduction.mesh,
        axis);
  }
}

void overlap(const Reduction &reduction) {
  if (llvm::any_of(reduction.inputs, isHostScalar))
    return;
  Operation *op = reduction.op;
  std::optional<RunKey> own =
      isDataParallel(reduction) ? std::nullopt : getRunKey(op);
  Block::iterator start = earliestStart(reduction, own),
                  wait = latestWait(reduction, own);
  // The start may lie past the collective itself (at the end of the run
  // it stood in): what reads its results stands after the wait.
  if (start == wait || !start->isBeforeInBlock(&*wait) ||
      !hasWorkBetween(start, wait, op))
    return;
  Location loc =
      isDataParallel(reduction) ? withoutLayer(op->getLoc()) : op->getLoc();
  OpBuilder b(op->getContext());
  b.setInsertionPoint(op->getBlock(), start);
  Operation *started = startOf(b, loc, reduction);
  started->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  b.setInsertionPoint(op->getBlock(), wait);
  auto waited =
      WaitOp::create(b, loc, op->getResultTypes(), started->getResult(0));
  waited->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  op->replaceAllUsesWith(waited.getResults());
  op->erase();
}

/// An axis named in `axes` that no mesh of `module` has, if any.
std::optional<StringRef> unknownAxis(ModuleOp module,
                                     ArrayRef<std::string> axes) {
  llvm::StringSet<> known;
  module.walk([&](MeshOp mesh) {
    for (StringRef name : mesh.getAxisNames().getAsValueRange<StringAttr>())
      known.insert(name);
  });
  for (const std::string &axis : axes)
    if (!known.contains(axis))
      return StringRef(axis);
  return std::nullopt;
}

struct OverlapCollectivesPass
    : public megatron::impl::OverlapCollectivesBase<OverlapCollectivesPass> {
  using OverlapCollectivesBase::OverlapCollectivesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(tp::verifyProgramDialects(module, getArgument())))
      return signalPassFailure();
    if (std::optional<StringRef> axis = unknownAxis(module, axes)) {
      module.emitError() << getArgument() << ": axes names '" << *axis
                         << "', an axis no tp.mesh of the program has";
      return signalPassFailure();
    }
    SmallVector<Reduction> reductions;
    module.walk([&](Operation *op) {
      std::optional<Reduction> reduction = asReduction(op);
      if (reduction &&
          (axes.empty() || llvm::is_contained(axes, reduction->axis)))
        reductions.push_back(*reduction);
    });
    for (const Reduction &reduction : reductions)
      overlap(reduction);
  }
};

} // namespace
