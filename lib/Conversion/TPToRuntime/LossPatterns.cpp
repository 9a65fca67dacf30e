//===- LossPatterns.cpp - the vocabulary-parallel cross-entropy -----------===//
#include "RuntimeCalls.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;
using namespace mlir::tp;

Value runtime::lowerXentMax(CallBuilder &c, XentMaxOp op) {
  int64_t vocab = op.getLogits().getType().getShape().back();
  Value start = c.offsetI64(op.getOffset());
  Value logits = c.input(op.getLogits());
  CallBuilder::Output max = c.output(op.getType());
  c.call(kernel("mrt_vocab_ce_local_max", op.getLogits()),
         {logits, c.i64(numElements(op.getMax())), c.i64(vocab), start,
          c.i64(op.getValidVocab()), max.view});
  return c.tensor(max);
}

std::pair<Value, Value> runtime::lowerXentSumExp(CallBuilder &c,
                                                 XentSumExpOp op) {
  int64_t vocab = op.getLogits().getType().getShape().back();
  Value start = c.offsetI64(op.getOffset());
  Value logits = c.input(op.getLogits()), targets = c.input(op.getTargets()),
        max = c.input(op.getMax());
  CallBuilder::Output sumExp = c.output(op.getSumExp().getType()),
                      target = c.output(op.getTargetLogit().getType());
  c.call(kernel("mrt_vocab_ce_local_sumexp", op.getLogits()),
         {logits, targets, c.i64(numElements(op.getMax())), c.i64(vocab), start,
          c.i64(op.getValidVocab()), max, sumExp.view, target.view});
  return {c.tensor(sumExp), c.tensor(target)};
}

/// The kernels divide by the tokens this rank holds; with `mean_over` (a
/// batch split across ranks) the mean is over that many instead: `value`
/// times local / mean_over.
static Value scaleToMeanOver(CallBuilder &c, Value value, IntegerAttr meanOver,
                             int64_t localTokens) {
  if (!meanOver)
    return value;
  auto share = arith::ConstantOp::create(
      c.b, c.loc,
      c.b.getF32FloatAttr(static_cast<double>(localTokens) /
                          static_cast<double>(meanOver.getInt())));
  return arith::MulFOp::create(c.b, c.loc, value, share);
}

Value runtime::lowerXentLoss(CallBuilder &c, XentLossOp op) {
  Value max = c.input(op.getMax()), sumExp = c.input(op.getSumExp()),
        target = c.input(op.getTargetLogit());
  int64_t tokens = numElements(op.getMax());
  SmallVector<Value> loss;
  c.call("mrt_vocab_ce_loss_f32", {max, sumExp, target, c.i64(tokens)},
         c.b.getF32Type(), &loss);
  return tensor::FromElementsOp::create(
      c.b, c.loc, op.getType(),
      scaleToMeanOver(c, loss.front(), op.getMeanOverAttr(), tokens));
}

namespace {

struct XentMaxToRuntime : RuntimePattern<XentMaxOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(XentMaxOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    rewriter.replaceOp(op, lowerXentMax(c, op));
    return success();
  }
};

struct XentSumExpToRuntime : RuntimePattern<XentSumExpOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(XentSumExpOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    auto [sumExp, target] = lowerXentSumExp(c, op);
    rewriter.replaceOp(op, {sumExp, target});
    return success();
  }
};

struct XentLossToRuntime : RuntimePattern<XentLossOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(XentLossOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    rewriter.replaceOp(op, lowerXentLoss(c, op));
    return success();
  }
};

/// Unsplit cross-entropy is the vocabulary-parallel recipe on one rank:
/// the same pieces with offset 0 and nothing to all-reduce.
struct CrossEntropyToRuntime : RuntimePattern<CrossEntropyOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(CrossEntropyOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value offset = arith::ConstantIndexOp::create(rewriter, loc, 0);
    auto [max, sums, loss] =
        buildCrossEntropyPieces(rewriter, op, offset, {}, std::nullopt);
    rewriter.replaceOp(op, loss.getResult());
    // The pieces are lowered here, in order, as their own patterns would.
    CallBuilder c(rewriter, loc);
    rewriter.setInsertionPoint(max);
    rewriter.replaceOp(max, lowerXentMax(c, max));
    rewriter.setInsertionPoint(sums);
    auto [sumExp, target] = lowerXentSumExp(c, sums);
    rewriter.replaceOp(sums, {sumExp, target});
    rewriter.setInsertionPoint(loss);
    rewriter.replaceOp(loss, lowerXentLoss(c, loss));
    return success();
  }
};

struct XentGradToRuntime : RuntimePattern<XentGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(XentGradOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    int64_t vocab = op.getLogits().getType().getShape().back();
    Value start = c.offsetI64(op.getOffset());
    Value lossGrad = scaleToMeanOver(
        c,
        tensor::ExtractOp::create(rewriter, op.getLoc(), op.getLossGrad(),
                                  ValueRange()),
        op.getMeanOverAttr(), numElements(op.getMax()));
    Value logits = c.input(op.getLogits()), targets = c.input(op.getTargets()),
          max = c.input(op.getMax()), sumExp = c.input(op.getSumExp());
    CallBuilder::Output dlogits = c.output(op.getType());
    c.call(kernel("mrt_vocab_ce_bwd", op.getLogits()),
           {logits, targets, max, sumExp, c.i64(numElements(op.getMax())),
            c.i64(vocab), start, c.i64(op.getValidVocab()), lossGrad,
            dlogits.view});
    rewriter.replaceOp(op, c.tensor(dlogits));
    return success();
  }
};

} // namespace

void megatron::populateLossToRuntimePatterns(RewritePatternSet &patterns,
                                             const RuntimeTargetInfo &target) {
  patterns.add<CrossEntropyToRuntime, XentMaxToRuntime, XentSumExpToRuntime,
               XentLossToRuntime, XentGradToRuntime>(patterns.getContext(),
                                                     target);
}
