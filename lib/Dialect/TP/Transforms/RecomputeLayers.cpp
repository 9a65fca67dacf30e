//===- RecomputeLayers.cpp - recompute each layer's forward in its backward -===//
//
// Activation checkpointing (Chen et al. 2016; Megatron-LM's full-layer
// recomputation): the backward pass of a layer reads the activations its
// forward computed, and keeping all of them alive from the forward pass to
// the backward pass is what bounds the batch and depth a rank can train.
// Here each layer keeps only what enters it (the previous layer's output);
// just before the layer's backward pass, the forward ops whose values the
// backward reads run again, and the backward reads their copies. The
// originals then die at the end of the layer's forward, so a rank holds one
// layer's activations at a time plus one input per layer, for one more
// forward pass of compute (and of its tensor-parallel all-reduces).
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/Utils/LayerLocations.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "megatron/Dialect/TP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_RECOMPUTELAYERS
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;

namespace {

/// Whether `user` runs at or after `point`, both in (or under) one block.
bool runsFrom(Operation *point, Operation *user) {
  Operation *ancestor = point->getBlock()->findAncestorOpInBlock(*user);
  return ancestor && (ancestor == point || point->isBeforeInBlock(ancestor));
}

/// Each layer's forward ops in program order, and the first op of its
/// backward pass, in `block`.
struct LayerPasses {
  SmallVector<Operation *> forward;
  Operation *backwardStart = nullptr;
};

llvm::MapVector<int64_t, LayerPasses> collectLayerPasses(Block &block) {
  llvm::MapVector<int64_t, LayerPasses> layers;
  for (Operation &op : block) {
    std::optional<RunKey> key = getRunKey(&op);
    if (!key)
      continue;
    LayerPasses &passes = layers[key->first];
    if (key->second == "forward")
      passes.forward.push_back(&op);
    else if (key->second == "backward" && !passes.backwardStart)
      passes.backwardStart = &op;
  }
  return layers;
}

/// The forward ops whose values are read from `point` on, and the forward
/// ops of the layer those values are computed from: what must run again.
/// Selectively, only SelectiveRecompute ops: the others' results stay
/// alive, and what the recomputed ops read from them is read as it is.
llvm::SetVector<Operation *> opsToRecompute(ArrayRef<Operation *> forward,
                                            Operation *point, bool selective) {
  llvm::DenseSet<Operation *> inLayer;
  for (Operation *op : forward)
    if (!selective || op->hasTrait<tp::SelectiveRecompute>())
      inLayer.insert(op);
  llvm::SetVector<Operation *> needed;
  SmallVector<Operation *> worklist;
  for (Operation *op : forward)
    if (inLayer.contains(op) &&
        llvm::any_of(op->getUsers(),
                     [&](Operation *user) { return runsFrom(point, user); }))
      worklist.push_back(op);
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!needed.insert(op))
      continue;
    llvm::SetVector<Value> reads(op->operand_begin(), op->operand_end());
    getUsedValuesDefinedAbove(op->getRegions(), reads);
    for (Value value : reads)
      if (Operation *def = value.getDefiningOp(); def && inLayer.contains(def))
        worklist.push_back(def);
  }
  return needed;
}

/// Copies `ops` (in program order) before `point`, marked as recomputed,
/// and makes every use from `point` on read the copies.
void recomputeBefore(Operation *point, ArrayRef<Operation *> forward,
                     const llvm::SetVector<Operation *> &needed) {
  OpBuilder b(point);
  IRMapping copies;
  Operation *first = nullptr;
  for (Operation *op : forward)
    if (needed.contains(op)) {
      Operation *copy = b.clone(*op, copies);
      first = first ? first : copy;
    }
  tp::markPhase(first, point, "recompute");
  for (Operation *op : needed)
    for (Value result : op->getResults())
      result.replaceUsesWithIf(copies.lookup(result), [&](OpOperand &use) {
        return runsFrom(point, use.getOwner());
      });
}

void recomputeLayers(Block &block, bool selective) {
  for (auto &[layer, passes] : collectLayerPasses(block)) {
    if (!passes.backwardStart || passes.forward.empty())
      continue;
    llvm::SetVector<Operation *> needed =
        opsToRecompute(passes.forward, passes.backwardStart, selective);
    if (!needed.empty())
      recomputeBefore(passes.backwardStart, passes.forward, needed);
  }
}

struct RecomputeLayersPass
    : public megatron::impl::RecomputeLayersBase<RecomputeLayersPass> {
  using RecomputeLayersBase::RecomputeLayersBase;
  void runOnOperation() override {
    if (failed(tp::verifyProgramDialects(getOperation(), getArgument())))
      return signalPassFailure();
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() && !tp::isForwardEntry(function))
        function.walk(
            [&](Block *block) { recomputeLayers(*block, selective); });
  }
};

} // namespace
