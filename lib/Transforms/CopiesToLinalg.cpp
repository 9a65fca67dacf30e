//===- CopiesToLinalg.cpp - buffer copies as linalg.copy ------------------===//
#include "megatron/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_COPIESTOLINALG
#include "megatron/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

struct CopiesToLinalgPass
    : public megatron::impl::CopiesToLinalgBase<CopiesToLinalgPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    getOperation().walk([&](memref::CopyOp copy) {
      rewriter.setInsertionPoint(copy);
      rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(),
                                                  copy.getTarget());
    });
  }
};

} // namespace
