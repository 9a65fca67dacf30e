//===- ExpandReshapes.cpp - a framework's merged dimensions as loops ------===//
#include "megatron/Dialect/TP/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_EXPANDRESHAPES
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

/// The most rounds of expansion and composition: each round folds what the
/// last one's compositions exposed; IREE's programs need two or three.
constexpr int kMaxRounds = 8;

/// Whether `reshape` merges dimensions a plan may split apart: a group of
/// its reassociation with two dimensions longer than 1. One that only adds
/// or drops unit dimensions reveals no factor, and folding those after
/// composition re-expands without end.
template <typename ReshapeOp>
bool mergesDimensions(ReshapeOp reshape, ArrayRef<int64_t> expanded) {
  return llvm::any_of(reshape.getReassociationIndices(),
                      [&](const ReassociationIndices &group) {
                        return llvm::count_if(group, [&](int64_t dim) {
                                 return expanded[dim] != 1;
                               }) > 1;
                      });
}

/// Whether to fold the reshape at `operand` into the linalg op beside it:
/// the collapse_shape the op reads, or the expand_shape reading the op.
bool foldsMergedDimensions(OpOperand *operand) {
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(operand->getOwner()))
    return mergesDimensions(expand, expand.getResultType().getShape());
  if (auto collapse = operand->get().getDefiningOp<tensor::CollapseShapeOp>())
    return mergesDimensions(collapse, collapse.getSrcType().getShape());
  return false;
}

/// Reshapes that merge dimensions folded into the linalg ops next to them,
/// by expanding the ops' iteration spaces.
FrozenRewritePatternSet expansionPatterns(MLIRContext *context) {
  RewritePatternSet patterns(context);
  // The fold patterns take generic ops; named ops are generics with a name.
  linalg::populateLinalgNamedOpsGeneralizationPatterns(patterns);
  // The expanded iteration space computes the same elements, in more loops.
  linalg::populateFoldReshapeOpsByExpansionPatterns(patterns,
                                                    foldsMergedDimensions);
  tensor::populateReassociativeReshapeFoldingPatterns(patterns);
  // A reshaped empty init is an empty tensor of the new shape: left as a
  // reshape, it would tie the init's layout to the merged dimension's.
  tensor::populateFoldTensorEmptyPatterns(patterns);
  return FrozenRewritePatternSet(std::move(patterns));
}

/// Chains of reshapes as one: IREE collapses [3, heads, head_width] into
/// one dimension and expands it again differently around each contraction,
/// and only the composed reshape says which dimensions stay whole. Apart
/// from the expansion, whose reshapes these patterns would otherwise
/// compose and re-split without end.
FrozenRewritePatternSet compositionPatterns(MLIRContext *context) {
  RewritePatternSet patterns(context);
  patterns.add<
      ComposeReassociativeReshapeOps<tensor::ExpandShapeOp,
                                     ReshapeOpKind::kExpand>,
      ComposeReassociativeReshapeOps<tensor::CollapseShapeOp,
                                     ReshapeOpKind::kCollapse>,
      ComposeExpandOfCollapseOp<tensor::ExpandShapeOp,
                                tensor::CollapseShapeOp>>(context);
  return FrozenRewritePatternSet(std::move(patterns));
}

struct ExpandReshapesPass
    : public megatron::impl::ExpandReshapesBase<ExpandReshapesPass> {
  void runOnOperation() override {
    FrozenRewritePatternSet expansion = expansionPatterns(&getContext());
    FrozenRewritePatternSet composition = compositionPatterns(&getContext());
    // Not converging within the driver's iterations or the rounds leaves
    // valid IR with fewer reshapes folded: a plan with more reshards, not a
    // wrong one.
    for (int round = 0; round < kMaxRounds; ++round) {
      (void)applyPatternsGreedily(getOperation(), expansion);
      bool composed = false;
      (void)applyPatternsGreedily(getOperation(), composition,
                                  GreedyRewriteConfig(), &composed);
      if (!composed)
        return;
    }
  }
};

} // namespace
