//===- BucketReductions.cpp - the dp gradient reduction in buckets --------===//
//
// Every parameter's gradient is all-reduced over "dp" once, after the
// backward pass. Issued one by one, a step pays a collective's latency per
// parameter; Megatron-LM and PyTorch DDP group them into buckets of a few
// tens of megabytes instead. This pass groups the sums over dp that no op
// reads in between into `tp.all_reduce_bucket` ops of at most
// `bucket-bytes` each, in the order their gradients are complete
// (Megatron's reverse parameter order), so that the first buckets can run
// under the rest of the backward pass (tp-overlap-collectives). The buckets
// stand before the first op that reads one of their sums.
//
//===----------------------------------------------------------------------===//
#include "LayerLocations.h"

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

/// Where `sum`'s gradient is complete: its definition in the block (the
/// block's start for an argument).
Operation *readyAt(AllReduceOp sum) {
  Block *block = sum->getBlock();
  Operation *def = sum.getInput().getDefiningOp();
  return def ? block->findAncestorOpInBlock(*def) : nullptr;
}

class Bucketer {
public:
  Bucketer(func::FuncOp function, int64_t limit)
      : function(function), limit(limit), b(function.getContext()) {}

  void run() {
    Block &body = function.front();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (readsSegment(op))
        flush(&op);
      if (isGradientSumOverDp(&op))
        segment.push_back(cast<AllReduceOp>(op));
    }
    flush(body.getTerminator());
  }

private:
  bool readsSegment(Operation &op) {
    return llvm::any_of(op.getOperands(), [&](Value value) {
      return llvm::is_contained(segment, value.getDefiningOp());
    });
  }

  /// The sums no op has read yet, in buckets before `before`: in the order
  /// their gradients are complete, so that the first bucket can be reduced
  /// while the backward pass still runs (tp-overlap-collectives).
  void flush(Operation *before) {
    llvm::stable_sort(segment, [](AllReduceOp a, AllReduceOp b) {
      Operation *readyA = readyAt(a), *readyB = readyAt(b);
      return readyA != readyB &&
             (!readyA || (readyB && readyA->isBeforeInBlock(readyB)));
    });
    SmallVector<AllReduceOp> bucket;
    int64_t bytes = 0;
    for (AllReduceOp sum : segment) {
      int64_t size = getNumBytes(sum.getType());
      if (!bucket.empty() && bytes + size > limit) {
        emit(bucket, before);
        bucket.clear();
        bytes = 0;
      }
      bucket.push_back(sum);
      bytes += size;
    }
    emit(bucket, before);
    segment.clear();
  }

  /// One op for the bucket's sums before `before`; a bucket of one stays a
  /// plain all-reduce.
  void emit(MutableArrayRef<AllReduceOp> bucket, Operation *before) {
    if (bucket.size() < 2)
      return;
    SmallVector<Value> inputs;
    SmallVector<Location> locs;
    for (AllReduceOp reduce : bucket) {
      inputs.push_back(reduce.getInput());
      locs.push_back(reduce.getLoc());
    }
    // The gradients of several layers: the bucket is in none of them.
    Location loc = megatron::withoutLayer(b.getFusedLoc(locs));
    b.setInsertionPoint(before);
    auto merged = AllReduceBucketOp::create(
        b, loc, inputs, bucket.front().getMeshAttr(),
        bucket.front().getAxisAttr());
    merged->setDiscardableAttrs(bucket.front()->getDiscardableAttrDictionary());
    for (auto [reduce, result] : llvm::zip(bucket, merged.getResults())) {
      reduce.getResult().replaceAllUsesWith(result);
      reduce.erase();
    }
  }

  func::FuncOp function;
  int64_t limit;
  OpBuilder b;
  SmallVector<AllReduceOp> segment;
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
