//===- FuseElementwise.cpp - elementwise fusion across shared producers ---===//
#include "megatron/Lowering/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

/// Reductions (bias-gradient sums) are not: fusing a producer into them
/// would recompute it once per reduced row.
bool isElementwise(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  return generic && generic.getNumLoops() == generic.getNumParallelLoops();
}

/// Operands read at every point of the iteration space (not broadcast):
/// the inputs, and the outputs an in-place update reads (AdamW's parameter
/// and moments).
unsigned fullSizeInputs(linalg::GenericOp op) {
  unsigned count = 0;
  for (OpOperand &operand : op->getOpOperands())
    if ((op.isDpsInput(&operand) || op.payloadUsesValueFromOperand(&operand)) &&
        op.getMatchingIndexingMap(&operand).getNumResults() == op.getNumLoops())
      ++count;
  return count;
}

/// A producer with other users stays materialised for them, so fusing it
/// pays only when the consumer then reads no more than it did: x + bias is
/// worth recomputing (one full-size input for one), a residual sum of two
/// full-size tensors is not (the residual stream would be re-added from
/// the embeddings in every later block).
bool shouldFuse(OpOperand *operand) {
  Operation *producer = operand->get().getDefiningOp();
  if (!isElementwise(producer) || !isElementwise(operand->getOwner()))
    return false;
  return producer->hasOneUse() ||
         fullSizeInputs(cast<linalg::GenericOp>(producer)) <= 1;
}

struct FuseElementwisePass
    : public megatron::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, shouldFuse);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
