//===- ElementwisePatterns.cpp - adds, GELU, SwiGLU, conversions, sums ----===//
//
// Elementwise ops become linalg.generic on tensors, so that elementwise
// fusion can merge bias, GELU and residual chains before bufferization.
//
//===----------------------------------------------------------------------===//
#include "RuntimeCalls.h"

#include "megatron_rt/contract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;
using namespace mlir::tp;

namespace {

/// x + y elementwise, y broadcast over x's leading dimensions (a bias) or
/// of x's shape (a residual).
template <typename OpTy>
struct SumToRuntime : RuntimePattern<OpTy> {
  using RuntimePattern<OpTy>::RuntimePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    auto [x, y] = terms(op);
    CallBuilder c(rewriter, op.getLoc());
    auto add = [](OpBuilder &nb, Location loc, ValueRange args) -> Value {
      return arith::AddFOp::create(nb, loc, args[0], args[1]);
    };
    rewriter.replaceOp(op, isLoopAccumulator(op, x)
                               ? c.elementwise(op.getType(), {y}, add, x)
                               : c.elementwise(op.getType(), {x, y}, add));
    return success();
  }
  /// Whether x is a value a loop carries and the sum what the loop carries
  /// on (a micro-batch loop's gradient). One-shot bufferization keeps a
  /// loop's carried buffer only if each iteration writes the one it was
  /// given, so the sum accumulates into x's buffer.
  static bool isLoopAccumulator(OpTy op, Value x) {
    auto carried = dyn_cast<BlockArgument>(x);
    auto loop = carried ? dyn_cast<scf::ForOp>(carried.getOwner()->getParentOp())
                        : scf::ForOp();
    if (!loop || !op->hasOneUse() || x.getType() != op.getType())
      return false;
    OpOperand &use = *op->getUses().begin();
    return use.getOwner() == loop.getBody()->getTerminator() &&
           loop.getRegionIterArgs()[use.getOperandNumber()] == carried;
  }
  static std::pair<Value, Value> terms(BiasAddOp op) {
    return {op.getInput(), op.getBias()};
  }
  static std::pair<Value, Value> terms(AddOp op) {
    return {op.getLhs(), op.getRhs()};
  }
};

/// The elementwise generic widens and rounds; the body is the identity.
struct ConvertToRuntime : RuntimePattern<ConvertOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(ConvertOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    rewriter.replaceOp(
        op, c.elementwise(op.getType(), {op.getInput()},
                          [](OpBuilder &, Location, ValueRange args) {
                            return args[0];
                          }));
    return success();
  }
};

/// The scalar arithmetic of an elementwise body, in its element type.
struct ScalarMath {
  OpBuilder &b;
  Location loc;
  Type type;
  Value constant(double value) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
  }
  Value mul(Value l, Value r) { return arith::MulFOp::create(b, loc, l, r); }
  Value add(Value l, Value r) { return arith::AddFOp::create(b, loc, l, r); }
  Value sub(Value l, Value r) { return arith::SubFOp::create(b, loc, l, r); }
  /// 1 / (1 + exp(-x)).
  Value sigmoid(Value x) {
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::DivFOp::create(b, loc, constant(1.0),
                                 add(constant(1.0), e));
  }
};

/// GPT-2's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the
/// constants the runtime's kernels use (megatron_rt/contract.h).
struct GeluToRuntime : RuntimePattern<GeluOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(GeluOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    rewriter.replaceOp(
        op, c.elementwise(
                op.getType(), {op.getInput()},
                [](OpBuilder &nb, Location loc, ValueRange args) -> Value {
                  ScalarMath m{nb, loc, args[0].getType()};
                  Value x = args[0];
                  Value cube = m.mul(x, m.mul(x, x));
                  Value inner =
                      m.add(x, m.mul(m.constant(MGT_GELU_CUBIC), cube));
                  Value scaled =
                      m.mul(m.constant(MGT_GELU_SQRT_2_OVER_PI), inner);
                  Value onePlus = m.add(m.constant(1.0),
                                        math::TanhOp::create(nb, loc, scaled));
                  return m.mul(m.mul(m.constant(0.5), x), onePlus);
                }));
    return success();
  }
};

/// d/dx of GPT-2's GELU times the incoming gradient.
struct GeluGradToRuntime : RuntimePattern<GeluGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(GeluGradOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    rewriter.replaceOp(
        op,
        c.elementwise(
            op.getType(), {op.getInput(), op.getGrad()},
            [](OpBuilder &nb, Location loc, ValueRange args) -> Value {
              ScalarMath m{nb, loc, args[0].getType()};
              Value x = args[0], square = m.mul(x, x);
              Value s = m.constant(MGT_GELU_SQRT_2_OVER_PI);
              Value t = math::TanhOp::create(
                  nb, loc,
                  m.mul(s, m.add(x, m.mul(m.constant(MGT_GELU_CUBIC),
                                          m.mul(square, x)))));
              Value sech2 =
                  arith::SubFOp::create(nb, loc, m.constant(1.0), m.mul(t, t));
              Value inner =
                  m.mul(s, m.add(m.constant(1.0),
                                 m.mul(m.constant(3 * MGT_GELU_CUBIC), square)));
              Value derivative =
                  m.add(m.mul(m.constant(0.5), m.add(m.constant(1.0), t)),
                        m.mul(m.mul(m.constant(0.5), x), m.mul(sech2, inner)));
              return m.mul(derivative, args[1]);
            }));
    return success();
  }
};

/// silu(gate) * up, silu(x) = x * sigmoid(x).
struct SwiGLUToRuntime : RuntimePattern<SwiGLUOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(SwiGLUOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    rewriter.replaceOp(
        op, c.elementwise(op.getType(), {op.getGate(), op.getUp()},
                          [](OpBuilder &nb, Location loc,
                             ValueRange args) -> Value {
                            ScalarMath m{nb, loc, args[0].getType()};
                            Value gate = args[0];
                            return m.mul(m.mul(gate, m.sigmoid(gate)), args[1]);
                          }));
    return success();
  }
};

/// d/dgate = grad * up * s (1 + gate (1 - s)) and d/dup = grad * silu(gate)
/// with s = sigmoid(gate): two elementwise generics, which elementwise
/// fusion merges.
struct SwiGLUGradToRuntime : RuntimePattern<SwiGLUGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(SwiGLUGradOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    auto type = cast<RankedTensorType>(op.getGrad().getType());
    ValueRange inputs = op->getOperands(); // gate, up, grad
    Value gateGrad = c.elementwise(
        type, inputs,
        [](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          ScalarMath m{nb, loc, args[0].getType()};
          Value gate = args[0], s = m.sigmoid(gate);
          Value slope =
              m.mul(s, m.add(m.constant(1.0),
                             m.mul(gate, m.sub(m.constant(1.0), s))));
          return m.mul(m.mul(args[2], args[1]), slope);
        });
    Value upGrad = c.elementwise(
        type, {op.getGate(), op.getGrad()},
        [](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          ScalarMath m{nb, loc, args[0].getType()};
          return m.mul(args[1], m.mul(args[0], m.sigmoid(args[0])));
        });
    rewriter.replaceOp(op, {gateGrad, upGrad});
    return success();
  }
};

/// The bias gradient: a sum over every leading (token) dimension, which
/// the runtime splits across threads by rows as well as columns.
struct SumRowsToRuntime : RuntimePattern<SumToOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(SumToOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    int64_t cols = numElements(op.getResult());
    Value input = c.input(op.getInput());
    CallBuilder::Output sum = c.output(op.getType());
    c.call(kernel("mrt_sum_rows", op.getInput()),
           {input, c.i64(numElements(op.getInput()) / cols), c.i64(cols),
            sum.view});
    rewriter.replaceOp(op, c.tensor(sum));
    return success();
  }
};

} // namespace

void megatron::populateElementwiseToRuntimePatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<SumToRuntime<AddOp>, SumToRuntime<BiasAddOp>, ConvertToRuntime,
               GeluToRuntime, GeluGradToRuntime, SwiGLUToRuntime,
               SwiGLUGradToRuntime, SumRowsToRuntime>(
      patterns.getContext(), target);
}
