//===- ApproximateMath.cpp - vectorisable tanh and exp --------------------===//
#include "megatron/Lowering/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_APPROXIMATEMATH
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

/// The functions the step's elementwise loops evaluate per element (GELU's
/// tanh and its gradient's, softmax's exp).
bool isApproximated(StringRef opName) {
  return opName == math::TanhOp::getOperationName() ||
         opName == math::ExpOp::getOperationName();
}

struct ApproximateMath : megatron::impl::ApproximateMathBase<ApproximateMath> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, isApproximated);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
