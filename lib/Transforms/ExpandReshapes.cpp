//===- ExpandReshapes.cpp - a framework's merged dimensions as loops ------===//
#include "megatron/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_EXPANDRESHAPES
#include "megatron/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

struct ExpandReshapesPass
    : public megatron::impl::ExpandReshapesBase<ExpandReshapesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // The fold patterns take generic ops; named ops are generics with a name.
    linalg::populateLinalgNamedOpsGeneralizationPatterns(patterns);
    // Every reshape next to a linalg op is folded: the expanded iteration
    // space computes the same elements, in more loops.
    linalg::populateFoldReshapeOpsByExpansionPatterns(
        patterns, [](OpOperand *) { return true; });
    tensor::populateReassociativeReshapeFoldingPatterns(patterns);
    // A reshaped empty init is an empty tensor of the new shape: left as a
    // reshape, it would tie the init's layout to the merged dimension's.
    tensor::populateFoldTensorEmptyPatterns(patterns);
    // Not converging within the driver's iterations leaves valid IR with
    // fewer reshapes folded: a plan with more reshards, not a wrong one.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns));
  }
};

} // namespace
