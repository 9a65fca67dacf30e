//===- EmbeddingPatterns.cpp - token and position embeddings --------------===//
#include "RuntimeCalls.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;
using namespace mlir::tp;

namespace {

struct EmbeddingToRuntime : RuntimePattern<EmbeddingOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(EmbeddingOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    auto table = op.getTable().getType();
    Value start = c.offsetI64(op.getOffset());
    Value t = c.input(op.getTable()), ids = c.input(op.getIds());
    CallBuilder::Output y = c.output(op.getType());
    c.call(kernel("mrt_embedding_fwd", op.getTable()),
           {t, ids, start, c.i64(table.getDimSize(0)),
            c.i64(table.getDimSize(1)), c.i64(numElements(op.getIds())),
            y.view});
    rewriter.replaceOp(op, c.tensor(y));
    return success();
  }
};

/// Adds the rows of `op`'s gradient into `dtable`, a flat view of a buffer
/// of `op`'s type: the kernel accumulates.
void callEmbeddingBwd(CallBuilder &c, EmbeddingGradOp op, Value dtable) {
  auto table = op.getType();
  Value start = c.offsetI64(op.getOffset());
  Value dy = c.input(op.getGrad()), ids = c.input(op.getIds());
  c.call(kernel("mrt_embedding_bwd", op.getGrad()),
         {dy, ids, start, c.i64(table.getDimSize(0)),
          c.i64(table.getDimSize(1)), c.i64(numElements(op.getIds())),
          dtable});
}

struct EmbeddingGradToRuntime : RuntimePattern<EmbeddingGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(EmbeddingGradOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    CallBuilder::Output dtable = c.output(op.getType());
    // Rows no id selects stay zero.
    linalg::FillOp::create(rewriter, op.getLoc(), c.f32(0.0f), dtable.buffer);
    callEmbeddingBwd(c, op, dtable.view);
    rewriter.replaceOp(op, c.tensor(dtable));
    return success();
  }
};

/// `tp.add %g, (tp.embedding_grad ...)`: a tied table's gradient, its LM
/// head's plus its embedding's. The embedding's rows are added into %g's
/// buffer where they are, instead of zeroing a table-sized buffer, writing
/// the few rows the batch selects, and adding the two tables. Not where %g
/// is a loop's carried sum (micro-batches' gradient of an untied table):
/// viewed in place, the carried buffer would take a second layout, and
/// one-shot bufferization cannot allocate the copy such a loop then needs
/// (its realloc keeps the view's dynamic offset).
static bool isCarriedByLoop(Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  return arg && isa<LoopLikeOpInterface>(arg.getOwner()->getParentOp());
}

struct AccumulatedEmbeddingGrad : RuntimePattern<AddOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    for (auto [grad, other] : {std::pair(add.getLhs(), add.getRhs()),
                               std::pair(add.getRhs(), add.getLhs())}) {
      auto embedding = grad.getDefiningOp<EmbeddingGradOp>();
      if (!embedding || !embedding->hasOneUse() || !other.hasOneUse() ||
          isCarriedByLoop(other) || other.getType() != add.getType() ||
          embedding.getType() != add.getType())
        continue;
      CallBuilder c(rewriter, add.getLoc());
      CallBuilder::Output sum = c.inPlace(other);
      callEmbeddingBwd(c, embedding, sum.view);
      rewriter.replaceOp(add, c.tensor(sum));
      rewriter.eraseOp(embedding);
      return success();
    }
    return failure();
  }
};

/// The leading [rows, cols] block of a 2-D tensor.
struct LeadingBlock {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  LeadingBlock(Builder &b, RankedTensorType block)
      : offsets(2, b.getIndexAttr(0)),
        sizes({b.getIndexAttr(block.getDimSize(0)),
               b.getIndexAttr(block.getDimSize(1))}),
        strides(2, b.getIndexAttr(1)) {}
};

/// The first T rows of the position table.
struct PositionEmbeddingToRuntime : RuntimePattern<PositionEmbeddingOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(PositionEmbeddingOp op,
                                PatternRewriter &rewriter) const override {
    LeadingBlock rows(rewriter, op.getType());
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        op, op.getType(), op.getTable(), rows.offsets, rows.sizes,
        rows.strides);
    return success();
  }
};

/// The gradient of the rows used, zeros for the positions beyond.
struct PositionEmbeddingGradToRuntime
    : RuntimePattern<PositionEmbeddingGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(PositionEmbeddingGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    Value init = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                         type.getElementType());
    Value zero = linalg::FillOp::create(
                     rewriter, loc,
                     arith::ConstantOp::create(
                         rewriter, loc,
                         rewriter.getFloatAttr(type.getElementType(), 0.0))
                         .getResult(),
                     init)
                     .getResult(0);
    LeadingBlock rows(rewriter, op.getGrad().getType());
    rewriter.replaceOpWithNewOp<tensor::InsertSliceOp>(
        op, op.getGrad(), zero, rows.offsets, rows.sizes, rows.strides);
    return success();
  }
};

} // namespace

void megatron::populateEmbeddingGradAccumulationPatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<AccumulatedEmbeddingGrad>(patterns.getContext(), target);
}

void megatron::populateEmbeddingToRuntimePatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<EmbeddingToRuntime, EmbeddingGradToRuntime,
               PositionEmbeddingToRuntime, PositionEmbeddingGradToRuntime>(
      patterns.getContext(), target);
}
