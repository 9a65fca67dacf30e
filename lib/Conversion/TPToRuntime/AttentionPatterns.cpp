//===- AttentionPatterns.cpp - attention, rotary embeddings, softmax ------===//
#include "RuntimeCalls.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;
using namespace mlir::tp;

namespace {

/// The shape the attention kernels take: [batch, seq, heads * width] and
/// the key/value heads.
struct AttentionShape {
  int64_t batch, seq, heads, kvHeads, width;
};
AttentionShape attentionShape(RankedTensorType out, int64_t heads,
                              int64_t kvHeads) {
  return {out.getDimSize(0), out.getDimSize(1), heads, kvHeads,
          out.getDimSize(2) / heads};
}

/// q, k and v as the kernels take them (megatron_rt/attention.h): views
/// and row strides, the sections of one fused buffer or three of their own.
struct QKVViews {
  Value q, k, v;
  int64_t ldq, ldkv;
};
QKVViews qkvViews(CallBuilder &c, ArrayRef<Value> views,
                  const AttentionShape &s) {
  const int64_t queryWidth = s.heads * s.width;
  if (views.size() == 1)
    return {views[0], c.shifted(views[0], queryWidth),
            c.shifted(views[0], 2 * queryWidth), 3 * queryWidth,
            3 * queryWidth};
  return {views[0], views[1], views[2], queryWidth, s.kvHeads * s.width};
}

/// The kernels' arguments after their pointers: B, T, H, KV, D.
SmallVector<Value> sizes(CallBuilder &c, const AttentionShape &s) {
  return {c.i64(s.batch), c.i64(s.seq), c.i64(s.heads), c.i64(s.kvHeads),
          c.i64(s.width)};
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

/// The kernels' arguments after the sizes: the probability dropout (rate,
/// seed, step, stream, the first sequence and head, the global heads) of a
/// training step's op; rate 0 where it has no dropout or no key.
template <typename AttentionLikeOp>
SmallVector<Value> dropoutArgs(CallBuilder &c, AttentionLikeOp op,
                               const AttentionShape &s) {
  if (!op.hasDropout() || !op.getKey())
    return SmallVector<Value>{c.f32(0.0f), c.i64(0), c.i64(0), c.i64(0),
                              c.i64(0),    c.i64(0), c.i64(s.heads)};
  auto [seed, step] = c.dropoutKey(op.getKey());
  ValueRange offsets = op.getOffsets();
  std::optional<ArrayRef<int64_t>> global = op.getGlobalShape();
  return SmallVector<Value>{
      c.f32(static_cast<float>(op.getDropout()->convertToDouble())),
      seed,
      step,
      c.offsetI64(op.getStream()),
      c.offsetI64(offsets.empty() ? Value() : offsets[0]),
      c.offsetI64(offsets.empty() ? Value() : offsets[1]),
      c.i64(global ? (*global)[1] : s.heads)};
}

/// Calls the forward kernel on `in` into `y` and `lse`.
void callForward(CallBuilder &c, Value storage, const QKVViews &in, Value y,
                 Value lse, const AttentionShape &s, ValueRange dropout) {
  SmallVector<Value> args = {in.q,         in.k,       in.v,
                             c.i64(in.ldq), c.i64(in.ldkv), y,
                             lse};
  args.append(sizes(c, s));
  args.append(dropout.begin(), dropout.end());
  c.call(kernel("mrt_attention_fwd", storage), args);
}

SmallVector<Value> inputViews(CallBuilder &c, ValueRange inputs) {
  return llvm::map_to_vector(inputs, [&](Value v) { return c.input(v); });
}

struct AttentionToRuntime : RuntimePattern<AttentionOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    AttentionShape s = attentionShape(op.getType(), op.getNumHeads(),
                                      op.getKeyValueHeads());
    SmallVector<Value> dropout = dropoutArgs(c, op, s);
    QKVViews in = qkvViews(c, inputViews(c, op.getInputs()), s);
    auto [y, lse] = forwardOutputs(c, op.getType(), s);
    callForward(c, op.getInputs().front(), in, y.view, lse.view, s, dropout);
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
    AttentionShape s =
        attentionShape(grad, op.getNumHeads(), op.getKeyValueHeads());
    SmallVector<Value> dropout = dropoutArgs(c, op, s);
    Value storage = op.getInputs().front();
    QKVViews in = qkvViews(c, inputViews(c, op.getInputs()), s);
    Value dout = c.input(op.getGrad());
    auto [out, lse] = forwardOutputs(c, grad, s);
    callForward(c, storage, in, out.view, lse.view, s, dropout);
    SmallVector<CallBuilder::Output> grads = llvm::map_to_vector(
        op.getInputs().getTypes(), [&](Type type) { return c.output(type); });
    QKVViews d = qkvViews(
        c, llvm::map_to_vector(grads, [](auto &g) { return g.view; }), s);
    SmallVector<Value> args = {in.q,   in.k,       in.v,     c.i64(in.ldq),
                               c.i64(in.ldkv), out.view, dout,     lse.view,
                               d.q,    d.k,        d.v};
    args.append(sizes(c, s));
    args.append(dropout);
    c.call(kernel("mrt_attention_bwd", storage), args);
    rewriter.replaceOp(op, llvm::map_to_vector(grads, [&](auto &g) {
                         return c.tensor(g);
                       }));
    return success();
  }
};

/// The rotation of each pair by its position's angle (negated when
/// inverse); a training sequence starts at position 0.
struct RoPEToRuntime : RuntimePattern<RoPEOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(RoPEOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    RankedTensorType type = op.getType();
    AttentionShape s =
        attentionShape(type, op.getNumHeads(), op.getNumHeads());
    Value starts = op.getPositions();
    if (!starts)
      starts = arith::ConstantOp::create(
          rewriter, op.getLoc(),
          DenseElementsAttr::get(
              RankedTensorType::get({s.batch}, rewriter.getI32Type()),
              rewriter.getI32IntegerAttr(0)));
    Value x = c.input(op.getInput()), positions = c.input(starts);
    CallBuilder::Output y = c.output(type);
    c.call(kernel("mrt_rope", op.getInput()),
           {x, positions, y.view, c.i64(s.batch), c.i64(s.seq),
            c.i64(s.heads), c.i64(s.width),
            c.f64(op.getTheta().convertToDouble()),
            c.i64(op.getInverse() ? -1 : 1)});
    rewriter.replaceOp(op, c.tensor(y));
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
  patterns.add<AttentionToRuntime, AttentionGradToRuntime, RoPEToRuntime,
               SoftmaxToRuntime, SoftmaxGradToRuntime>(patterns.getContext(),
                                                       target);
}
