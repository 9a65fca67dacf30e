//===- DropoutPatterns.cpp - dropout by global element index --------------===//
#include "RuntimeCalls.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;
using namespace mlir::tp;

namespace {

/// A training step's dropout is one call of the runtime's kernel
/// (megatron_rt/dropout.h), which draws each element's bits from its
/// global index: the tensor as [n0, n1, n2], leading dimensions of 1 added
/// to a lower rank. Without a key (evaluation) it is the identity.
struct DropoutToRuntime : RuntimePattern<DropoutOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(DropoutOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getKey() || !op.hasDropout()) {
      rewriter.replaceOp(op, op.getInput());
      return success();
    }
    CallBuilder c(rewriter, op.getLoc());
    RankedTensorType type = op.getType();
    const int64_t pad = 3 - type.getRank();
    ArrayRef<int64_t> global = op.getGlobalShape().value_or(type.getShape());
    auto local = [&](int64_t dim) {
      return c.i64(dim < pad ? 1 : type.getDimSize(dim - pad));
    };
    auto offset = [&](int64_t dim) {
      return c.offsetI64(dim < pad || op.getOffsets().empty()
                             ? Value()
                             : op.getOffsets()[dim - pad]);
    };
    auto globalSize = [&](int64_t dim) {
      return c.i64(dim < pad ? 1 : global[dim - pad]);
    };
    auto [seed, step] = c.dropoutKey(op.getKey());
    CallBuilder::Output y = c.output(type);
    c.call(kernel("mrt_dropout", op.getInput()),
           {c.input(op.getInput()), y.view, local(0), local(1), local(2),
            offset(0), offset(1), offset(2), globalSize(1), globalSize(2),
            c.f32(static_cast<float>(op.getDropout().convertToDouble())),
            seed, step, c.offsetI64(op.getStream())});
    rewriter.replaceOp(op, c.tensor(y));
    return success();
  }
};

} // namespace

void megatron::populateDropoutToRuntimePatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<DropoutToRuntime>(patterns.getContext(), target);
}
