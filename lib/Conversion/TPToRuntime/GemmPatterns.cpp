//===- GemmPatterns.cpp - GEMMs to runtime calls --------------------------===//
#include "RuntimeCalls.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;
using namespace mlir::tp;

static LogicalResult checkGemm(MatmulOp op) {
  if (op.getRhs().getType().getRank() != 2)
    return op.emitOpError(
        "with a batched rhs has no runtime lowering; only [K, N] weights");
  if (op.getTransposeLhs() && op.getLhs().getType().getRank() != 2)
    return op.emitOpError(
        "with transpose_lhs and batch dimensions has no runtime lowering");
  return success();
}

LogicalResult runtime::lowerGemm(RewriterBase &rewriter, MatmulOp op,
                                 GemmEpilogue epilogue) {
  if (failed(checkGemm(op)))
    return failure();
  CallBuilder c(rewriter, op.getLoc());
  auto lhs = op.getLhs().getType();
  int64_t k = op.getTransposeLhs() ? lhs.getDimSize(0) : lhs.getShape().back();
  int64_t m = numElements(op.getLhs()) / k;
  int64_t n = op.getType().getShape().back();
  Value a = c.input(op.getLhs()), w = c.input(op.getRhs());
  CallBuilder::Output out = c.output(op.getType());
  SmallVector<Value> args = {c.i32(op.getTransposeLhs()),
                             c.i32(op.getTransposeRhs()), c.i64(m), c.i64(n),
                             c.i64(k)};
  Value lda = c.i64(op.getTransposeLhs() ? m : k),
        ldb = c.i64(op.getTransposeRhs() ? k : n);
  if (!epilogue.bias) {
    // The verifier gives lhs and result one element type.
    args.append({c.f32(1.0f), a, lda, w, ldb, c.f32(0.0f), out.view,
                 c.i64(n)});
    c.call(kernel("mrt_gemm", op.getLhs()), args);
  } else if (!epilogue.gelu) {
    args.append({a, lda, w, ldb, c.input(epilogue.bias), out.view, c.i64(n)});
    c.call(kernel("mrt_gemm_bias", op.getLhs()), args);
  } else {
    CallBuilder::Output gelu = c.output(epilogue.gelu.getType());
    args.append({a, lda, w, ldb, c.input(epilogue.bias), out.view, gelu.view,
                 c.i64(n)});
    c.call(kernel("mrt_gemm_bias_gelu", op.getLhs()), args);
    rewriter.replaceAllUsesWith(epilogue.gelu, c.tensor(gelu));
  }
  rewriter.replaceAllUsesWith(epilogue.sum, c.tensor(out));
  return success();
}

namespace {

struct MatmulToRuntime : RuntimePattern<MatmulOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(lowerGemm(rewriter, op, {op.getResult(), Value(), GeluOp()})))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

/// [K, N] = sum over rows of lhs^T rhs: one GEMM with A transposed.
struct WeightGradToRuntime : RuntimePattern<WeightGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(WeightGradOp op,
                                PatternRewriter &rewriter) const override {
    int64_t k = op.getType().getDimSize(0), n = op.getType().getDimSize(1);
    int64_t rows = numElements(op.getLhs()) / k;
    FailureOr<std::string> gemm = gemmKernel(op, op.getLhs(), op.getResult());
    if (failed(gemm))
      return failure();
    CallBuilder c(rewriter, op.getLoc());
    Value a = c.input(op.getLhs()), g = c.input(op.getRhs());
    CallBuilder::Output out = c.output(op.getType());
    c.call(*gemm, {c.i32(1), c.i32(0), c.i64(k), c.i64(n), c.i64(rows),
                   c.f32(1.0f), a, c.i64(k), g, c.i64(n), c.f32(0.0f),
                   out.view, c.i64(n)});
    rewriter.replaceOp(op, c.tensor(out));
    return success();
  }
};

/// A GEMM whose one use adds a [N] bias writes the sum itself (cuBLASLt's
/// epilogue on a GPU), and the sum's GELU too when it has one: the QKV
/// projection's bias costs no pass over its output, and the MLP's
/// pre-activation and GELU come out of its GEMM. Bias adds the residual +
/// layer-norm fusion took are gone by then.
struct GemmEpilogueFusion : RuntimePattern<MatmulOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(MatmulOp gemm,
                                PatternRewriter &rewriter) const override {
    if (!gemm->hasOneUse())
      return failure();
    auto add = dyn_cast<BiasAddOp>(*gemm->getUsers().begin());
    if (!add || add.getInput() != gemm.getResult() ||
        add.getBias().getType().getRank() != 1 ||
        !tp::isDefinedBefore(add.getBias(), gemm))
      return failure();
    GeluOp gelu = epilogueGelu(add.getResult());
    if (failed(lowerGemm(rewriter, gemm, {add.getResult(), add.getBias(), gelu})))
      return failure();
    if (gelu)
      rewriter.eraseOp(gelu);
    rewriter.eraseOp(add);
    rewriter.eraseOp(gemm);
    return success();
  }

  /// The GELU of `sum` the epilogue can compute too, at row sizes the
  /// target's epilogue supports.
  GeluOp epilogueGelu(Value sum) const {
    if (cast<ShapedType>(sum.getType()).getShape().back() %
            target.geluEpilogueRowMultiple !=
        0)
      return {};
    for (Operation *user : sum.getUsers())
      if (auto gelu = dyn_cast<GeluOp>(user))
        return gelu;
    return {};
  }
};

} // namespace

void megatron::populateGemmToRuntimePatterns(RewritePatternSet &patterns,
                                             const RuntimeTargetInfo &target) {
  patterns.add<MatmulToRuntime, WeightGradToRuntime>(patterns.getContext(),
                                                     target);
}

void megatron::populateGemmEpilogueFusionPatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<GemmEpilogueFusion>(patterns.getContext(), target);
}
