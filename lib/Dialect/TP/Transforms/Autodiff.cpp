//===- Autodiff.cpp - the backward pass of the per-rank program -----------===//
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tp-autodiff"

namespace mlir::megatron {
#define GEN_PASS_DEF_AUTODIFF
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

/// Ops without a gradient: index arithmetic, the rank's position, and the
/// statistics of the vocabulary-parallel loss (xent_loss's rule covers them).
bool isNonDifferentiable(Operation *op) {
  return isa<arith::ArithDialect>(op->getDialect()) ||
         isa<AxisIndexOp, XentMaxOp, XentSumExpOp>(op);
}

class Differentiator {
public:
  explicit Differentiator(func::FuncOp function)
      : function(function), b(function.getContext()) {}

  LogicalResult run() {
    auto ret = cast<func::ReturnOp>(function.front().getTerminator());
    if (ret.getNumOperands() != 1 ||
        !isa<RankedTensorType>(ret.getOperand(0).getType()) ||
        cast<RankedTensorType>(ret.getOperand(0).getType()).getRank() != 0)
      return function.emitError(
          "tp-autodiff needs a function returning one scalar loss");
    SmallVector<Operation *> forward;
    for (Operation &op : function.front().without_terminator())
      forward.push_back(&op);

    b.setInsertionPoint(ret);
    Value loss = ret.getOperand(0);
    grads[loss] = arith::ConstantOp::create(
        b, ret.getLoc(),
        DenseElementsAttr::get(cast<RankedTensorType>(loss.getType()),
                               b.getF32FloatAttr(1.0f)));
    for (Operation *op : llvm::reverse(forward))
      if (failed(differentiate(op)))
        return failure();
    markBackward(forward, ret);
    return returnGradients(ret);
  }

private:
  void accumulate(Value value, Value grad) {
    auto [it, inserted] = grads.try_emplace(value, grad);
    if (!inserted)
      it->second = AddOp::create(b, grad.getLoc(), it->second, grad);
  }

  LogicalResult differentiate(Operation *op) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(grads.lookup(result));
      any |= static_cast<bool>(resultGrads.back());
    }
    if (!any)
      return success();
    LLVM_DEBUG(llvm::dbgs() << "VJP of " << op->getName() << " at "
                            << op->getLoc() << "\n");
    if (auto vjp = dyn_cast<VJPOpInterface>(op))
      return vjp.buildVJP(b, resultGrads, [&](Value value, Value grad) {
        accumulate(value, grad);
      });
    if (isNonDifferentiable(op))
      return success();
    InFlightDiagnostic diag =
        op->emitOpError("has no gradient rule (VJPOpInterface)");
    // The global program's ops (tp.cross_entropy) become ones with rules
    // when tp-partition splits them.
    if (!isPartitioned(function))
      diag.attachNote(function.getLoc())
          << "@" << function.getName()
          << " is not partitioned: tp-autodiff differentiates the per-rank "
             "program tp-partition makes";
    return diag;
  }

  /// Everything between the forward ops and the return is the backward
  /// pass.
  void markBackward(ArrayRef<Operation *> forward, func::ReturnOp ret) {
    Operation *first = forward.empty() ? &function.front().front()
                                       : forward.back()->getNextNode();
    markPhase(first, ret, "backward");
  }

  /// The loss, then the gradient of each named float parameter.
  LogicalResult returnGradients(func::ReturnOp ret) {
    SmallVector<Value> results = {ret.getOperand(0)};
    SmallVector<StringAttr> names;
    for (BlockArgument arg : function.getArguments()) {
      auto name = function.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), TPDialect::kNameAttrName);
      if (!name || !isParameter(function, arg.getArgNumber()))
        continue;
      Value grad = grads.lookup(arg);
      results.push_back(grad ? grad : buildZeros(b, ret.getLoc(), arg.getType()));
      names.push_back(name);
    }
    ret->setOperands(results);
    function.setType(b.getFunctionType(function.getArgumentTypes(),
                                       TypeRange(ValueRange(results))));
    for (auto [index, name] : llvm::enumerate(names))
      function.setResultAttr(index + 1, TPDialect::kGradOfAttrName, name);
    return success();
  }

  func::FuncOp function;
  OpBuilder b;
  DenseMap<Value, Value> grads;
};

struct AutodiffPass : public megatron::impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    if (failed(tp::verifyProgramDialects(getOperation(), getArgument())))
      return signalPassFailure();
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() && !isForwardEntry(function) &&
          failed(Differentiator(function).run()))
        return signalPassFailure();
  }
};

} // namespace
