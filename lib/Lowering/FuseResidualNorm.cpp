//===- FuseResidualNorm.cpp - residual add and layer norm as one op -------===//
//
// A pre-norm transformer closes each block with `x + bias_add(delta, b)`
// and opens the next with the layer norm of that sum. The lowering runs the
// pair as one kernel; fused here, on tp ops, the pair stays together when
// tp-outline-layers cuts the program at layer boundaries, which fall
// between them.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/Utils/Utils.h"
#include "megatron/Lowering/Passes.h"

#include "mlir/IR/PatternMatch.h"

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
  // The add's location first: the fused op belongs to the add's layer.
  auto fused = ResidualLayerNormOp::create(
      rewriter, rewriter.getFusedLoc({add.getLoc(), norm.getLoc()}), residual,
      branch.getInput(), branch.getBias(), norm.getWeight(), norm.getBias(),
      norm.getEpsilonAttr());
  if (Attribute phase = add->getAttr(TPDialect::kPhaseAttrName))
    fused->setAttr(TPDialect::kPhaseAttrName, phase);
  rewriter.replaceOp(add, fused.getSum());
  rewriter.replaceOp(norm, fused.getResult());
  rewriter.eraseOp(branch);
}

struct FuseResidualNormPass
    : public megatron::impl::FuseResidualNormBase<FuseResidualNormPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(tp::verifyProgramDialects(module, getArgument())))
      return signalPassFailure();
    SmallVector<LayerNormOp> norms;
    module.walk([&](LayerNormOp norm) { norms.push_back(norm); });
    IRRewriter rewriter(&getContext());
    for (LayerNormOp norm : norms)
      fuseWithResidual(norm, rewriter);
  }
};

} // namespace
