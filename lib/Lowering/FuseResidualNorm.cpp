//===- FuseResidualNorm.cpp - residual add and norm as one op -------------===//
//
// A pre-norm transformer closes each block with `x + bias_add(delta, b)`
// (`x + delta` without biases) and opens the next with the layer (or RMS)
// norm of that sum. The lowering runs the
// pair as one kernel; fused here, on tp ops, the pair stays together when
// tp-outline-layers cuts the program at layer boundaries, which fall
// between them.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/Utils/Utils.h"
#include "megatron/Lowering/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_FUSERESIDUALNORM
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

/// The add's branch: a bias add of a [C] bias whose one use is the add.
BiasAddOp branchOf(AddOp add) {
  for (Value side : {add.getRhs(), add.getLhs()})
    if (auto branch = side.getDefiningOp<BiasAddOp>();
        branch && branch->hasOneUse() &&
        branch.getBias().getType().getRank() == 1)
      return branch;
  return {};
}

/// The fused op keeps the add's phase (forward or recomputed) and goes at
/// the add's location first: it belongs to the add's layer.
Location fusedLocation(AddOp add, Operation *norm, RewriterBase &rewriter) {
  return rewriter.getFusedLoc({add.getLoc(), norm->getLoc()});
}
void keepPhase(AddOp add, Operation *fused) {
  if (Attribute phase = add->getAttr(TPDialect::kPhaseAttrName))
    fused->setAttr(TPDialect::kPhaseAttrName, phase);
}

/// `norm` and the residual add it reads as one op, if they form the
/// pattern.
void fuseWithResidual(LayerNormOp norm, RewriterBase &rewriter) {
  auto add = norm.getInput().getDefiningOp<AddOp>();
  if (!add || !tp::isDefinedBefore(norm.getWeight(), add) ||
      !tp::isDefinedBefore(norm.getBias(), add))
    return;
  BiasAddOp branch = branchOf(add);
  if (!branch)
    return;
  Value residual =
      add.getLhs() == branch.getResult() ? add.getRhs() : add.getLhs();
  rewriter.setInsertionPoint(add);
  auto fused = ResidualLayerNormOp::create(
      rewriter, fusedLocation(add, norm, rewriter), residual,
      branch.getInput(), branch.getBias(), norm.getWeight(), norm.getBias(),
      norm.getEpsilonAttr());
  keepPhase(add, fused);
  rewriter.replaceOp(add, fused.getSum());
  rewriter.replaceOp(norm, fused.getResult());
  rewriter.eraseOp(branch);
}

/// An RMS norm of `residual + delta`: no bias to fold.
void fuseWithResidual(RMSNormOp norm, RewriterBase &rewriter) {
  auto add = norm.getInput().getDefiningOp<AddOp>();
  if (!add || !tp::isDefinedBefore(norm.getWeight(), add))
    return;
  rewriter.setInsertionPoint(add);
  auto fused = ResidualRMSNormOp::create(
      rewriter, fusedLocation(add, norm, rewriter), add.getLhs(),
      add.getRhs(), norm.getWeight(), norm.getEpsilonAttr());
  keepPhase(add, fused);
  rewriter.replaceOp(add, fused.getSum());
  rewriter.replaceOp(norm, fused.getResult());
}

struct FuseResidualNormPass
    : public megatron::impl::FuseResidualNormBase<FuseResidualNormPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(tp::verifyProgramDialects(module, getArgument())))
      return signalPassFailure();
    SmallVector<Operation *> norms;
    module.walk([&](Operation *op) {
      if (isa<LayerNormOp, RMSNormOp>(op))
        norms.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *norm : norms)
      TypeSwitch<Operation *>(norm).Case<LayerNormOp, RMSNormOp>(
          [&](auto op) { fuseWithResidual(op, rewriter); });
  }
};

} // namespace
