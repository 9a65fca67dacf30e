//===- CopiesToLinalg.cpp - buffer copies as linalg.copy ------------------===//
#include "megatron/Lowering/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_COPIESTOLINALG
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

/// Whether `a` and `b` are one buffer: the same value, or the same view of
/// it (a member a loop over the layers updated in place and writes back).
bool isSameBuffer(Value a, Value b) {
  if (a == b)
    return true;
  Operation *viewA = a.getDefiningOp<memref::SubViewOp>();
  Operation *viewB = b.getDefiningOp<memref::SubViewOp>();
  return viewA && viewB &&
         OperationEquivalence::isEquivalentTo(
             viewA, viewB, OperationEquivalence::IgnoreLocations);
}

bool isContiguous(Value buffer) {
  return memref::isStaticShapeAndContiguousRowMajor(
      cast<MemRefType>(buffer.getType()));
}

struct CopiesToLinalgPass
    : public megatron::impl::CopiesToLinalgBase<CopiesToLinalgPass> {
  using CopiesToLinalgBase::CopiesToLinalgBase;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    getOperation().walk([&](memref::CopyOp copy) {
      if (isSameBuffer(copy.getSource(), copy.getTarget()))
        return rewriter.eraseOp(copy);
      if (hostMemory && isContiguous(copy.getSource()) &&
          isContiguous(copy.getTarget()))
        return;
      rewriter.setInsertionPoint(copy);
      rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(),
                                                  copy.getTarget());
    });
  }
};

} // namespace
