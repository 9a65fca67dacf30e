//===- OptimizerPatterns.cpp - the gradient norm and AdamW ----------------===//
#include "RuntimeCalls.h"

#include "megatron_rt/contract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;
using namespace mlir::tp;

namespace {

/// Each input's sum of squares (double) goes into its slot of one buffer,
/// in the device's memory on a GPU; one read adds them in order on the
/// host, the only synchronisation of the group.
struct SumSquaresToRuntime : RuntimePattern<SumSquaresOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(SumSquaresOp op,
                                PatternRewriter &rewriter) const override {
    for (Value grad : op.getInputs())
      if (!getElementTypeOrSelf(grad.getType()).isF32())
        return op.emitOpError("sums the squares of f32 gradients only, got ")
               << grad.getType();
    CallBuilder c(rewriter, op.getLoc());
    Type f64 = rewriter.getF64Type();
    int64_t count = op.getInputs().size();
    CallBuilder::Output sums = c.output(RankedTensorType::get({count}, f64));
    for (auto [slot, grad] : llvm::enumerate(op.getInputs()))
      c.call("mrt_sum_squares_f32", {c.input(grad), c.i64(numElements(grad)),
                                     sums.view, c.i64(slot)});
    SmallVector<Value> total;
    c.call("mrt_sum_f64", {sums.view, c.i64(count)}, f64, &total);
    rewriter.replaceOpWithNewOp<arith::TruncFOp>(op, rewriter.getF32Type(),
                                                 total[0]);
    return success();
  }
};

/// AdamW as one elementwise linalg.generic writing the parameter and both
/// moments in their own buffers (their old values where `apply` is false). The scalar factors are computed in double,
/// as torch.optim.AdamW computes them in Python floats.
struct AdamWToRuntime : RuntimePattern<AdamWOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(AdamWOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getParam().getType().getElementType().isF32())
      return op.emitOpError("updates fp32 master weights only, got ")
             << op.getParam().getType();
    Location loc = op.getLoc();
    CallBuilder c(rewriter, loc);
    RewriterBase &b = rewriter;
    Type f64 = b.getF64Type(), f32Type = b.getF32Type();
    auto hyper = [&](int64_t index) -> Value {
      return arith::ExtFOp::create(b, loc, f64,
                                   c.scalar(op.getHyperparameters(), index));
    };
    auto constant = [&](double value) -> Value {
      return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(value));
    };
    auto narrow = [&](Value value) -> Value {
      return arith::TruncFOp::create(b, loc, f32Type, value);
    };
    Value lr = hyper(MGT_HP_LR), beta1 = hyper(MGT_HP_BETA1),
          beta2 = hyper(MGT_HP_BETA2), eps = hyper(MGT_HP_EPS),
          decay = hyper(MGT_HP_WEIGHT_DECAY), step = hyper(MGT_HP_STEP);
    Value one = constant(1.0);
    Value correction1 = arith::SubFOp::create(
        b, loc, one, math::PowFOp::create(b, loc, beta1, step));
    Value correction2 = arith::SubFOp::create(
        b, loc, one, math::PowFOp::create(b, loc, beta2, step));
    Value stepSize = narrow(arith::DivFOp::create(b, loc, lr, correction1));
    Value correction2Sqrt = narrow(math::SqrtOp::create(b, loc, correction2));
    Value keep = narrow(arith::SubFOp::create(
        b, loc, one, arith::MulFOp::create(b, loc, lr, decay)));
    Value oneMinusBeta1 = narrow(arith::SubFOp::create(b, loc, one, beta1));
    Value oneMinusBeta2 = narrow(arith::SubFOp::create(b, loc, one, beta2));
    Value beta2f = narrow(beta2), epsf = narrow(eps);
    Value scale = op.getGradScale(), apply = op.getApply();
    bool decays = op.getDecay();

    auto type = op.getParam().getType();
    SmallVector<AffineMap> maps(4, b.getMultiDimIdentityMap(type.getRank()));
    SmallVector<utils::IteratorType> iterators(type.getRank(),
                                               utils::IteratorType::parallel);
    auto update = linalg::GenericOp::create(
        b, loc, TypeRange{type, type, type}, ValueRange{op.getGrad()},
        ValueRange{op.getParam(), op.getExpAvg(), op.getExpAvgSq()}, maps,
        iterators, [&](OpBuilder &nb, Location nl, ValueRange args) {
          auto mul = [&](Value l, Value r) -> Value {
            return arith::MulFOp::create(nb, nl, l, r);
          };
          auto add = [&](Value l, Value r) -> Value {
            return arith::AddFOp::create(nb, nl, l, r);
          };
          Value g = mul(args[0], scale);
          Value param = decays ? mul(args[1], keep) : args[1];
          Value m = add(args[2],
                        mul(oneMinusBeta1,
                            arith::SubFOp::create(nb, nl, g, args[2])));
          Value v = add(mul(args[3], beta2f), mul(oneMinusBeta2, mul(g, g)));
          Value denom = add(
              arith::DivFOp::create(nb, nl, math::SqrtOp::create(nb, nl, v),
                                    correction2Sqrt),
              epsf);
          Value newParam = arith::SubFOp::create(
              nb, nl, param,
              mul(stepSize, arith::DivFOp::create(nb, nl, m, denom)));
          // A step with a non-finite loss or norm keeps every element.
          auto unlessSkipped = [&](Value updated, Value old) -> Value {
            return arith::SelectOp::create(nb, nl, apply, updated, old);
          };
          linalg::YieldOp::create(
              nb, nl,
              ValueRange{unlessSkipped(newParam, args[1]),
                         unlessSkipped(m, args[2]), unlessSkipped(v, args[3])});
        });
    rewriter.replaceOp(op, update.getResults());
    return success();
  }
};

} // namespace

void megatron::populateOptimizerToRuntimePatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<SumSquaresToRuntime, AdamWToRuntime>(patterns.getContext(),
                                                    target);
}
