//===- BucketReductions.cpp - the dp gradient reduction in buckets --------===//
//
// Every parameter's gradient is all-reduced over "dp" once, after the
// backward pass. Issued one by one, a step pays a collective's latency per
// parameter; Megatron-LM and PyTorch DDP group them into buckets of a few
// tens of megabytes instead. This pass groups consecutive sums over dp, in
// program order, into `tp.all_reduce_bucket` ops of at most `bucket-bytes`
// each. A bucket ends before the first op that reads one of its sums, so
// every reduced gradient is defined before its first use.
//
//===----------------------------------------------------------------------===//
#include "megatron/Transforms/Passes.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_BUCKETREDUCTIONS
#include "megatron/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

/// A gradient's data-parallel sum, which a bucket can take.
bool isGradientSumOverDp(Operation *op) {
  auto reduce = dyn_cast<AllReduceOp>(op);
  return reduce && reduce.getKind() == ReductionKind::sum &&
         reduce.getAxis() == MGT_AXIS_NAME_DP && getPhase(op) == "backward" &&
         getElementTypeOrSelf(reduce.getType()).isF32();
}

class Bucketer {
public:
  Bucketer(func::FuncOp function, int64_t limit)
      : function(function), limit(limit), b(function.getContext()) {}

  void run() {
    Block &body = function.front();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (readsBucket(op))
        flush(&op);
      if (!isGradientSumOverDp(&op))
        continue;
      int64_t size = getNumBytes(op.getResult(0).getType());
      if (!bucket.empty() && bytes + size > limit)
        flush(&op);
      bucket.push_back(cast<AllReduceOp>(op));
      bytes += size;
    }
  }

private:
  bool readsBucket(Operation &op) {
    return llvm::any_of(op.getOperands(), [&](Value value) {
      return llvm::is_contained(bucket, value.getDefiningOp());
    });
  }

  /// The bucket's sums as one op before `before`; a bucket of one stays a
  /// plain all-reduce.
  void flush(Operation *before) {
    if (bucket.size() > 1) {
      SmallVector<Value> inputs;
      for (AllReduceOp reduce : bucket)
        inputs.push_back(reduce.getInput());
      b.setInsertionPoint(before);
      auto merged = AllReduceBucketOp::create(
          b, bucket.front().getLoc(), inputs, bucket.front().getMeshAttr(),
          bucket.front().getAxisAttr());
      merged->setDiscardableAttrs(bucket.front()->getDiscardableAttrDictionary());
      for (auto [reduce, result] : llvm::zip(bucket, merged.getResults())) {
        reduce.getResult().replaceAllUsesWith(result);
        reduce.erase();
      }
    }
    bucket.clear();
    bytes = 0;
  }

  func::FuncOp function;
  int64_t limit;
  OpBuilder b;
  SmallVector<AllReduceOp> bucket;
  int64_t bytes = 0;
};

struct BucketReductionsPass
    : public megatron::impl::BucketReductionsBase<BucketReductionsPass> {
  using BucketReductionsBase::BucketReductionsBase;
  void runOnOperation() override {
    if (failed(tp::verifyProgramDialects(getOperation(), getArgument())))
      return signalPassFailure();
    if (bucketBytes < 1) {
      getOperation().emitError("bucket-bytes must be positive, got ")
          << bucketBytes.getValue();
      return signalPassFailure();
    }
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal())
        Bucketer(function, bucketBytes).run();
  }
};

} // namespace
