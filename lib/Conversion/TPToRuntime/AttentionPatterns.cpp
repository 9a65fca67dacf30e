//===- AttentionPatterns.cpp - attention and softmax ----------------------===//
#include "RuntimeCalls.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;
using namespace mlir::tp;

namespace {

/// The shape the attention kernels take: [batch, seq, heads * width].
struct AttentionShape {
  int64_t batch, seq, heads, width;
};
AttentionShape attentionShape(RankedTensorType out, int64_t heads) {
  return {out.getDimSize(0), out.getDimSize(1), heads,
          out.getDimSize(2) / heads};
}

/// The buffers the forward kernel writes: the attention and the per-row
/// log-sum-exps the backward kernel reads.
std::pair<CallBuilder::Output, CallBuilder::Output>
forwardOutputs(CallBuilder &c, RankedTensorType out, const AttentionShape &s) {
  CallBuilder::Output y = c.output(out);
  CallBuilder::Output lse = c.output(RankedTensorType::get(
      {s.batch, s.heads, s.seq}, c.b.getF32Type()));
  return {y, lse};
}

struct AttentionToRuntime : RuntimePattern<AttentionOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    AttentionShape s = attentionShape(op.getType(), op.getNumHeads());
    Value qkv = c.input(op.getQkv());
    auto [y, lse] = forwardOutputs(c, op.getType(), s);
    c.call(kernel("mrt_attention_fwd", op.getQkv()),
           {qkv, y.view, lse.view, c.i64(s.batch), c.i64(s.seq),
            c.i64(s.heads), c.i64(s.width)});
    rewriter.replaceOp(op, c.tensor(y));
    return success();
  }
};

/// The forward is recomputed for its output and log-sum-exp, so the
/// T x T probabilities are never stored.
struct AttentionGradToRuntime : RuntimePattern<AttentionGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    auto grad = op.getGrad().getType();
    AttentionShape s = attentionShape(grad, op.getNumHeads());
    Value qkv = c.input(op.getQkv()), dout = c.input(op.getGrad());
    auto [out, lse] = forwardOutputs(c, grad, s);
    SmallVector<Value> sizes = {c.i64(s.batch), c.i64(s.seq), c.i64(s.heads),
                                c.i64(s.width)};
    SmallVector<Value> forward = {qkv, out.view, lse.view};
    forward.append(sizes);
    c.call(kernel("mrt_attention_fwd", op.getQkv()), forward);
    CallBuilder::Output dqkv = c.output(op.getType());
    SmallVector<Value> backward = {qkv, out.view, dout, lse.view, dqkv.view};
    backward.append(sizes);
    c.call(kernel("mrt_attention_bwd", op.getQkv()), backward);
    rewriter.replaceOp(op, c.tensor(dqkv));
    return success();
  }
};

Value maximum(OpBuilder &b, Location loc, Value acc, Value x) {
  return arith::MaximumFOp::create(b, loc, acc, x);
}
Value sum(OpBuilder &b, Location loc, Value acc, Value x) {
  return arith::AddFOp::create(b, loc, acc, x);
}
Value product(OpBuilder &b, Location loc, ValueRange args) {
  return arith::MulFOp::create(b, loc, args[0], args[1]);
}

/// exp(x - max) / sum: a chain of reductions and elementwise generics.
struct SoftmaxToRuntime : RuntimePattern<SoftmaxOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    int64_t dim = op.getDim();
    Value max = c.reduceAlong(op.getInput(), dim,
                              -std::numeric_limits<double>::infinity(), maximum);
    Value exps = c.withRow(op.getInput(), max, dim,
                           [](OpBuilder &nb, Location nl, Value x,
                              Value m) -> Value {
                             return math::ExpOp::create(
                                 nb, nl, arith::SubFOp::create(nb, nl, x, m));
                           });
    Value total = c.reduceAlong(exps, dim, 0.0, sum);
    rewriter.replaceOp(
        op, c.withRow(exps, total, dim,
                      [](OpBuilder &nb, Location nl, Value e, Value s) -> Value {
                        return arith::DivFOp::create(nb, nl, e, s);
                      }));
    return success();
  }
};

/// y * (dy - sum(dy * y)) along the softmax's dimension.
struct SoftmaxGradToRuntime : RuntimePattern<SoftmaxGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(SoftmaxGradOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    int64_t dim = op.getDim();
    Value products =
        c.elementwise(op.getType(), {op.getOutput(), op.getGrad()}, product);
    Value dot = c.reduceAlong(products, dim, 0.0, sum);
    Value centred = c.withRow(op.getGrad(), dot, dim,
                              [](OpBuilder &nb, Location nl, Value g,
                                 Value d) -> Value {
                                return arith::SubFOp::create(nb, nl, g, d);
                              });
    rewriter.replaceOp(
        op, c.elementwise(op.getType(), {op.getOutput(), centred}, product));
    return success();
  }
};

} // namespace

void megatron::populateAttentionToRuntimePatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<AttentionToRuntime, AttentionGradToRuntime, SoftmaxToRuntime,
               SoftmaxGradToRuntime>(patterns.getContext(), target);
}
