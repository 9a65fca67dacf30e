//===- OverlapCollectives.cpp - collectives in flight under compute -------===//
//
// Each all-reduce (and each fp32 reduce-scatter by rows, ZeRO-1's gradient
// reduction) becomes a start as early as its inputs allow and a wait as
// late as its first use allows, without entering another layer's run (the
// calls tp-outline-layers makes); the compute between the two runs while the
// sum is in flight.
//
//===----------------------------------------------------------------------===//
#include "LayerLocations.h"

#include "megatron/Transforms/Passes.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_OVERLAPCOLLECTIVES
#include "megatron/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

namespace {

/// A collective this pass can split: what it sums, how, over what, and
/// whether each rank keeps only its rows of the sums (a reduce-scatter).
struct Reduction {
  Operation *op;
  ValueRange inputs;
  ReductionKind kind;
  FlatSymbolRefAttr mesh;
  StringRef axis;
  bool scattersRows = false;
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
                     /*scattersRows=*/true};
  if (auto scatter = dyn_cast<ReduceScatterOp>(op);
      scatter && scatter.getKind() == ReductionKind::sum &&
      scatter.getDim() == 0 &&
      getElementTypeOrSelf(scatter.getInput().getType()).isF32())
    return Reduction{op, op->getOperands(), ReductionKind::sum,
                     scatter.getMeshAttr(), scatter.getAxis(),
                     /*scattersRows=*/true};
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

void overlap(const Reduction &reduction) {
  if (llvm::any_of(reduction.inputs, isHostScalar))
    return;
  Operation *op = reduction.op;
  std::optional<RunKey> own =
      isDataParallel(reduction) ? std::nullopt : getRunKey(op);
  Block::iterator start = earliestStart(reduction, own),
                  wait = latestWait(reduction, own);
  bool startsBefore =
      start == Block::iterator(op) || start->isBeforeInBlock(op);
  if (!startsBefore || !op->isBeforeInBlock(&*wait) ||
      !hasWorkBetween(start, wait, op))
    return;
  Location loc =
      isDataParallel(reduction) ? withoutLayer(op->getLoc()) : op->getLoc();
  OpBuilder b(op->getContext());
  b.setInsertionPoint(op->getBlock(), start);
  StringAttr axis = b.getStringAttr(reduction.axis);
  Operation *started =
      reduction.scattersRows
          ? ReduceScatterStartOp::create(b, loc, reduction.inputs,
                                         reduction.mesh, axis)
                .getOperation()
          : AllReduceStartOp::create(
                b, loc, reduction.inputs,
                ReductionKindAttr::get(b.getContext(), reduction.kind),
                reduction.mesh, axis)
                .getOperation();
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
