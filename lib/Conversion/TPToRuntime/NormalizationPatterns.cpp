//===- NormalizationPatterns.cpp - layer norms to runtime calls -----------===//
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

/// x + bias_add(delta, bias) feeding a layer norm (every residual
/// connection of GPT-2 but the embeddings'): one pass writes the sum, which
/// the residual stream carries on, and its norm, instead of a loop writing
/// the sum and a layer norm reading it back.
struct ResidualLayerNormFusion : RuntimePattern<LayerNormOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(LayerNormOp norm,
                                PatternRewriter &rewriter) const override {
    auto add = norm.getInput().getDefiningOp<AddOp>();
    if (!add || !definedBefore(norm.getWeight(), add) ||
        !definedBefore(norm.getBias(), add))
      return failure();
    BiasAddOp branch = branchOf(add);
    if (!branch)
      return failure();
    rewriter.setInsertionPoint(add);
    CallBuilder c(rewriter, add.getLoc());
    Value residual = add.getLhs() == branch.getResult() ? add.getRhs()
                                                        : add.getLhs();
    auto [rows, cols, stats] = normRows(add.getResult());
    Value x = c.input(residual), delta = c.input(branch.getInput()),
          bias = c.input(branch.getBias()), w = c.input(norm.getWeight()),
          beta = c.input(norm.getBias());
    CallBuilder::Output sum = c.output(add.getType()),
                        y = c.output(norm.getType()), mean = c.output(stats),
                        rstd = c.output(stats);
    c.call(kernel("mrt_residual_layernorm_fwd", add.getResult()),
           {x, delta, bias, sum.view, w, beta, y.view, mean.view, rstd.view,
            c.i64(rows), c.i64(cols),
            c.f32(norm.getEpsilon().convertToFloat())});
    rewriter.replaceOp(add, c.tensor(sum));
    rewriter.replaceOp(norm, c.tensor(y));
    rewriter.eraseOp(branch);
    return success();
  }

  /// The branch's bias add folds in only when this add is its one use.
  static BiasAddOp branchOf(AddOp add) {
    for (Value side : {add.getRhs(), add.getLhs()})
      if (auto branch = side.getDefiningOp<BiasAddOp>();
          branch && branch->hasOneUse())
        return branch;
    return {};
  }
};

} // namespace

void megatron::populateNormalizationToRuntimePatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<LayerNormToRuntime, LayerNormGradToRuntime>(
      patterns.getContext(), target);
}

void megatron::populateResidualLayerNormFusionPatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<ResidualLayerNormFusion>(patterns.getContext(), target);
}
