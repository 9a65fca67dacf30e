//===- NormalizationPatterns.cpp - layer and RMS norms to runtime calls ---===//
#include "RuntimeCalls.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;
using namespace mlir::tp;

namespace {

struct LayerNormToRuntime : RuntimePattern<LayerNormOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    auto [rows, cols, stats] = normRows(op.getInput());
    Value x = c.input(op.getInput()), w = c.input(op.getWeight()),
          bias = c.input(op.getBias());
    CallBuilder::Output y = c.output(op.getType()), mean = c.output(stats),
                        rstd = c.output(stats);
    c.call(kernel("mrt_layernorm_fwd", op.getInput()),
           {x, w, bias, y.view, mean.view, rstd.view, c.i64(rows), c.i64(cols),
            c.f32(op.getEpsilon().convertToFloat())});
    rewriter.replaceOp(op, c.tensor(y));
    return success();
  }
};

/// The statistics are recomputed rather than stored from the forward.
struct LayerNormGradToRuntime : RuntimePattern<LayerNormGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(LayerNormGradOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    auto [rows, cols, stats] = normRows(op.getInput());
    Value x = c.input(op.getInput()), w = c.input(op.getWeight()),
          dy = c.input(op.getGrad());
    CallBuilder::Output mean = c.output(stats), rstd = c.output(stats);
    c.call(kernel("mrt_layernorm_stats", op.getInput()),
           {x, mean.view, rstd.view, c.i64(rows), c.i64(cols),
            c.f32(op.getEpsilon().convertToFloat())});
    CallBuilder::Output dx = c.output(op.getInputGrad().getType()),
                        dw = c.output(op.getWeightGrad().getType()),
                        db = c.output(op.getBiasGrad().getType());
    c.call(kernel("mrt_layernorm_bwd", op.getInput()),
           {dy, x, w, mean.view, rstd.view, dx.view, dw.view, db.view,
            c.i64(rows), c.i64(cols)});
    rewriter.replaceOp(op, {c.tensor(dx), c.tensor(dw), c.tensor(db)});
    return success();
  }
};

/// The residual add and its norm (tp-fuse-residual-norm): one pass writes
/// the sum, which the residual stream carries on, and its norm.
struct ResidualLayerNormToRuntime : RuntimePattern<ResidualLayerNormOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(ResidualLayerNormOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    auto [rows, cols, stats] = normRows(op.getSum());
    Value x = c.input(op.getResidual()), delta = c.input(op.getDelta()),
          bias = c.input(op.getBias()), w = c.input(op.getWeight()),
          beta = c.input(op.getNormBias());
    CallBuilder::Output sum = c.output(op.getSum().getType()),
                        y = c.output(op.getResult().getType()),
                        mean = c.output(stats), rstd = c.output(stats);
    c.call(kernel("mrt_residual_layernorm_fwd", op.getSum()),
           {x, delta, bias, sum.view, w, beta, y.view, mean.view, rstd.view,
            c.i64(rows), c.i64(cols),
            c.f32(op.getEpsilon().convertToFloat())});
    rewriter.replaceOp(op, {c.tensor(sum), c.tensor(y)});
    return success();
  }
};

struct RMSNormToRuntime : RuntimePattern<RMSNormOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(RMSNormOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    auto [rows, cols, stats] = normRows(op.getInput());
    Value x = c.input(op.getInput()), w = c.input(op.getWeight());
    CallBuilder::Output y = c.output(op.getType()), rstd = c.output(stats);
    c.call(kernel("mrt_rmsnorm_fwd", op.getInput()),
           {x, w, y.view, rstd.view, c.i64(rows), c.i64(cols),
            c.f32(op.getEpsilon().convertToFloat())});
    rewriter.replaceOp(op, c.tensor(y));
    return success();
  }
};

/// As for the layer norm, rstd is recomputed rather than stored.
struct RMSNormGradToRuntime : RuntimePattern<RMSNormGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(RMSNormGradOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    auto [rows, cols, stats] = normRows(op.getInput());
    Value x = c.input(op.getInput()), w = c.input(op.getWeight()),
          dy = c.input(op.getGrad());
    CallBuilder::Output rstd = c.output(stats);
    c.call(kernel("mrt_rmsnorm_stats", op.getInput()),
           {x, rstd.view, c.i64(rows), c.i64(cols),
            c.f32(op.getEpsilon().convertToFloat())});
    CallBuilder::Output dx = c.output(op.getInputGrad().getType()),
                        dw = c.output(op.getWeightGrad().getType());
    c.call(kernel("mrt_rmsnorm_bwd", op.getInput()),
           {dy, x, w, rstd.view, dx.view, dw.view, c.i64(rows), c.i64(cols)});
    rewriter.replaceOp(op, {c.tensor(dx), c.tensor(dw)});
    return success();
  }
};

struct ResidualRMSNormToRuntime : RuntimePattern<ResidualRMSNormOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(ResidualRMSNormOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    auto [rows, cols, stats] = normRows(op.getSum());
    Value x = c.input(op.getResidual()), delta = c.input(op.getDelta()),
          w = c.input(op.getWeight());
    CallBuilder::Output sum = c.output(op.getSum().getType()),
                        y = c.output(op.getResult().getType()),
                        rstd = c.output(stats);
    c.call(kernel("mrt_residual_rmsnorm_fwd", op.getSum()),
           {x, delta, sum.view, w, y.view, rstd.view, c.i64(rows), c.i64(cols),
            c.f32(op.getEpsilon().convertToFloat())});
    rewriter.replaceOp(op, {c.tensor(sum), c.tensor(y)});
    return success();
  }
};

} // namespace

void megatron::populateNormalizationToRuntimePatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<LayerNormToRuntime, LayerNormGradToRuntime,
               ResidualLayerNormToRuntime, RMSNormToRuntime,
               RMSNormGradToRuntime, ResidualRMSNormToRuntime>(
      patterns.getContext(), target);
}
