//===- BucketReductions.cpp - the dp gradient reduction in buckets --------===//
//
// Every parameter's gradient is reduced over "dp" once, after the backward
// pass: all-reduced, or with ZeRO-1 reduce-scattered by rows. Issued one by
// one, a step pays a collective's latency per parameter; Megatron-LM and
// PyTorch DDP group them into buckets of a few tens of megabytes instead.
// This pass groups the reductions over dp that no op reads in between into
// `tp.all_reduce_bucket` and `tp.reduce_scatter_bucket` ops of at most
// `bucket-bytes` of gradient each, in the order their gradients are complete
// (Megatron's reverse parameter order), so that the first buckets can run
// under the rest of the backward pass (tp-overlap-collectives). The buckets
// stand before the first op that reads one of their results.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/Utils/LayerLocations.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_BUCKETREDUCTIONS
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

/// A gradient's data-parallel reduction, which a bucket can take: its sum
/// over dp, or ZeRO-1's reduce-scatter of its rows over dp.
bool isGradientReductionOverDp(Operation *op) {
  auto reduction = dyn_cast<CollectiveOpInterface>(op);
  if (!reduction || getPhase(op) != "backward" ||
      reduction.getCollectiveAxis() != MGT_AXIS_NAME_DP ||
      reduction.getCollectiveReduction() != ReductionKind::sum ||
      !getElementTypeOrSelf(op->getOperand(0).getType()).isF32())
    return false;
  if (auto scatter = dyn_cast<ReduceScatterOp>(op))
    return scatter.getDim() == 0;
  return isa<AllReduceOp>(op);
}

/// Where `reduction`'s gradient is complete: its definition in the block
/// (the block's start for an argument).
Operation *readyAt(Operation *reduction) {
  Block *block = reduction->getBlock();
  Operation *def = reduction->getOperand(0).getDefiningOp();
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
      if (isGradientReductionOverDp(&op))
        segment.push_back(&op);
    }
    flush(body.getTerminator());
  }

private:
  bool readsSegment(Operation &op) {
    return llvm::any_of(op.getOperands(), [&](Value value) {
      return llvm::is_contained(segment, value.getDefiningOp());
    });
  }

  /// The reductions no op has read yet, in buckets of one kind before
  /// `before`: in the order their gradients are complete, so that the first
  /// bucket can be reduced while the backward pass still runs
  /// (tp-overlap-collectives).
  void flush(Operation *before) {
    llvm::stable_sort(segment, [](Operation *a, Operation *b) {
      Operation *readyA = readyAt(a), *readyB = readyAt(b);
      return readyA != readyB &&
             (!readyA || (readyB && readyA->isBeforeInBlock(readyB)));
    });
    SmallVector<Operation *> sums, scatters;
    for (Operation *reduction : segment)
      (isa<AllReduceOp>(reduction) ? sums : scatters).push_back(reduction);
    fill(sums, before);
    fill(scatters, before);
    segment.clear();
  }

  /// Buckets of at most `limit` bytes of gradient, in order.
  void fill(ArrayRef<Operation *> reductions, Operation *before) {
    SmallVector<Operation *> bucket;
    int64_t bytes = 0;
    for (Operation *reduction : reductions) {
      int64_t size = getNumBytes(reduction->getOperand(0).getType());
      if (!bucket.empty() && bytes + size > limit) {
        emit(bucket, before);
        bucket.clear();
        bytes = 0;
      }
      bucket.push_back(reduction);
      bytes += size;
    }
    emit(bucket, before);
  }

  /// One op for the bucket's reductions before `before`; a bucket of one
  /// stays the plain collective.
  void emit(ArrayRef<Operation *> bucket, Operation *before) {
    if (bucket.size() < 2)
      return;
    SmallVector<Value> inputs;
    SmallVector<Type> types;
    SmallVector<Location> locs;
    for (Operation *reduction : bucket) {
      inputs.push_back(reduction->getOperand(0));
      types.push_back(reduction->getResult(0).getType());
      locs.push_back(reduction->getLoc());
    }
    // The gradients of several layers: the bucket is in none of them.
    Location loc = megatron::withoutLayer(b.getFusedLoc(locs));
    b.setInsertionPoint(before);
    auto first = cast<CollectiveOpInterface>(bucket.front());
    FlatSymbolRefAttr mesh = first.getCollectiveMesh();
    StringAttr axis = b.getStringAttr(first.getCollectiveAxis());
    Operation *merged =
        isa<AllReduceOp>(first)
            ? AllReduceBucketOp::create(b, loc, inputs, mesh, axis)
                  .getOperation()
            : ReduceScatterBucketOp::create(b, loc, types, inputs, mesh, axis)
                  .getOperation();
    merged->setDiscardableAttrs(first->getDiscardableAttrDictionary());
    for (auto [reduction, result] : llvm::zip(bucket, merged->getResults())) {
      reduction->getResult(0).replaceAllUsesWith(result);
      reduction->erase();
    }
  }

  func::FuncOp function;
  int64_t limit;
  OpBuilder b;
  SmallVector<Operation *> segment;
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
