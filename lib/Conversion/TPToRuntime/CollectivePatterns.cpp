//===- CollectivePatterns.cpp - conjugates and collectives ----------------===//
#include "RuntimeCalls.h"

#include "megatron_rt/contract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;
using namespace mlir::tp;

namespace {

int64_t runtimeReduction(ReductionKind kind) {
  return kind == ReductionKind::sum ? MRT_REDUCE_SUM : MRT_REDUCE_MAX;
}

/// Copies the tensor `value` into `destination`, a buffer of its shape.
void copyInto(CallBuilder &c, Value value, Value destination) {
  auto type = cast<RankedTensorType>(value.getType());
  Value source = bufferization::ToBufferOp::create(
      c.b, c.loc, MemRefType::get(type.getShape(), type.getElementType()),
      value, /*read_only=*/true);
  memref::CopyOp::create(c.b, c.loc, source, destination);
}

/// A fresh buffer holding `value`, which a collective then reduces in place.
CallBuilder::Output copyOf(CallBuilder &c, Value value) {
  CallBuilder::Output result = c.output(value.getType());
  copyInto(c, value, result.buffer);
  return result;
}

Value axisRank(CallBuilder &c, Operation *op, int64_t runtime) {
  SmallVector<Value> rank;
  c.call("mrt_axis_rank", {CallBuilder::context(op), c.i32(runtime)},
         c.b.getI64Type(), &rank);
  return arith::IndexCastOp::create(c.b, c.loc, c.b.getIndexType(), rank[0]);
}

/// A chunk of a tensor that chunks of `chunk`'s shape tile along `dim`:
/// chunk number `index` (a rank; null: the first).
struct ChunkSlice {
  SmallVector<OpFoldResult> offsets, sizes, strides;
};
ChunkSlice chunkAt(CallBuilder &c, RankedTensorType chunk, int64_t dim,
                   Value index) {
  ChunkSlice slice;
  slice.offsets.assign(chunk.getRank(), c.b.getIndexAttr(0));
  slice.strides.assign(chunk.getRank(), c.b.getIndexAttr(1));
  for (int64_t size : chunk.getShape())
    slice.sizes.push_back(c.b.getIndexAttr(size));
  if (index)
    slice.offsets[dim] =
        arith::MulIOp::create(
            c.b, c.loc, index,
            arith::ConstantIndexOp::create(c.b, c.loc, chunk.getDimSize(dim)))
            .getResult();
  return slice;
}

/// Sums (or maxes) a copy of `value` across the ranks of `axis`.
LogicalResult allReduce(PatternRewriter &rewriter, Operation *op, Value value,
                        StringRef axis, int64_t reduction) {
  FailureOr<int64_t> runtime = runtimeAxis(op, axis);
  if (failed(runtime))
    return failure();
  CallBuilder c(rewriter, op->getLoc());
  Value ctx = CallBuilder::context(op);
  auto type = cast<RankedTensorType>(value.getType());
  if (auto elements = value.getDefiningOp<tensor::FromElementsOp>();
      elements && type.getNumElements() == 1 && type.getElementType().isF32()) {
    // A host scalar (the squared gradient norm) stays one: no buffer for
    // the host to write, which a GPU target would place in device memory.
    SmallVector<Value> reduced;
    c.call("mrt_all_reduce_scalar_f32",
           {ctx, c.i32(*runtime), elements.getElements()[0], c.i32(reduction)},
           rewriter.getF32Type(), &reduced);
    rewriter.replaceOpWithNewOp<tensor::FromElementsOp>(op, type, reduced);
    return success();
  }
  CallBuilder::Output result = copyOf(c, value);
  c.call(kernel("mrt_all_reduce", value),
         {ctx, c.i32(*runtime), result.view, c.i64(numElements(value)),
          c.i32(reduction)});
  rewriter.replaceOp(op, c.tensor(result));
  return success();
}

/// Identity forward; its all-reduce is the backward pass's.
struct FToRuntime : RuntimePattern<FOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(FOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, op.getInput());
    return success();
  }
};

/// Every all-reduce, Megatron's g among them, from what it states: its
/// axis and its reduction.
struct AllReduceToRuntime
    : public OpInterfaceRewritePattern<CollectiveOpInterface> {
  AllReduceToRuntime(MLIRContext *context, const RuntimeTargetInfo &)
      : OpInterfaceRewritePattern(context) {}
  LogicalResult matchAndRewrite(CollectiveOpInterface op,
                                PatternRewriter &rewriter) const override {
    // A bucket and a started sum have their own lowerings.
    if (op.getCollectiveKind() != CollectiveKind::all_reduce ||
        op->getNumOperands() != 1 || isa<StartOpInterface>(op.getOperation()))
      return failure();
    return allReduce(rewriter, op, op->getOperand(0), op.getCollectiveAxis(),
                     runtimeReduction(op.getCollectiveReduction()));
  }
};

/// Collectives started on a copy of each tensor, and the ticket that
/// completes them all: the runtime completes started collectives in order.
struct Started {
  Value ticket;
  SmallVector<Value> buffers;
};

/// The buffer a started collective works on in place, and the arguments
/// its runtime call takes after it.
struct Staged {
  CallBuilder::Output buffer;
  SmallVector<Value> counts;
};

/// Starts, on the buffer `stage` makes of each of `inputs`, the collective
/// `startKernel` names over `axis` (runtime id `runtime`).
template <typename Stage>
Started startEach(CallBuilder &c, Operation *op, int64_t runtime,
                  ValueRange inputs, StringRef startKernel, Stage stage) {
  Value ctx = CallBuilder::context(op);
  Started started;
  for (auto [index, input] : llvm::enumerate(inputs)) {
    Staged staged = stage(index, input);
    SmallVector<Value> args = {ctx, c.i32(runtime), staged.buffer.view};
    llvm::append_range(args, staged.counts);
    SmallVector<Value> ticket;
    c.call(kernel(startKernel, input), args, c.b.getI64Type(), &ticket);
    started.ticket = ticket[0];
    started.buffers.push_back(staged.buffer.buffer);
  }
  return started;
}

/// Sums (or maxes) of a copy of each of `inputs`, started.
FailureOr<Started> startAllReduces(CallBuilder &c, Operation *op,
                                   StringRef axis, ValueRange inputs,
                                   int64_t reduction) {
  FailureOr<int64_t> runtime = runtimeAxis(op, axis);
  if (failed(runtime))
    return failure();
  return startEach(c, op, *runtime, inputs, "mrt_all_reduce_start",
                   [&](size_t, Value input) -> Staged {
                     return {copyOf(c, input),
                             {c.i64(numElements(input)), c.i32(reduction)}};
                   });
}

/// Sums of a copy of each of `inputs`, of which this rank keeps its rows, of
/// type `rows[i]`, started. The runtime leaves them at the start of the
/// buffer.
FailureOr<Started> startReduceScatters(CallBuilder &c, Operation *op,
                                       StringRef axis, ValueRange inputs,
                                       TypeRange rows) {
  FailureOr<int64_t> runtime = runtimeAxis(op, axis);
  if (failed(runtime))
    return failure();
  return startEach(
      c, op, *runtime, inputs, "mrt_reduce_scatter_start",
      [&](size_t index, Value input) -> Staged {
        return {copyOf(c, input),
                {c.i64(cast<RankedTensorType>(rows[index]).getNumElements())}};
      });
}

/// Gathers of each of `inputs`, this rank's rows of a tensor of type
/// `wholes[i]`, started: the rows are copied into their place in a buffer
/// of the whole tensor, which the runtime fills in place.
FailureOr<Started> startAllGathers(CallBuilder &c, Operation *op,
                                   StringRef axis, ValueRange inputs,
                                   TypeRange wholes) {
  FailureOr<int64_t> runtime = runtimeAxis(op, axis);
  if (failed(runtime))
    return failure();
  Value rank = axisRank(c, op, *runtime);
  return startEach(
      c, op, *runtime, inputs, "mrt_all_gather_start",
      [&](size_t index, Value input) -> Staged {
        auto rows = cast<RankedTensorType>(input.getType());
        CallBuilder::Output whole = c.output(wholes[index]);
        ChunkSlice mine = chunkAt(c, rows, 0, rank);
        copyInto(c, input,
                 memref::SubViewOp::create(c.b, c.loc, whole.buffer,
                                           mine.offsets, mine.sizes,
                                           mine.strides));
        return {whole, {c.i64(rows.getNumElements())}};
      });
}

/// The started collectives' results, of types `results`, read only after
/// their wait: a buffer whole, or the rows at its start that a reduce-scatter
/// leaves this rank.
SmallVector<Value> waitFor(CallBuilder &c, Operation *op,
                           const Started &started, TypeRange results) {
  c.call("mrt_collective_wait", {CallBuilder::context(op), started.ticket});
  SmallVector<Value> values;
  for (auto [buffer, type] : llvm::zip_equal(started.buffers, results)) {
    Value whole = c.tensor({buffer, Value()});
    auto rows = cast<RankedTensorType>(type);
    if (whole.getType() == rows) {
      values.push_back(whole);
      continue;
    }
    ChunkSlice first = chunkAt(c, rows, 0, Value());
    values.push_back(tensor::ExtractSliceOp::create(
        c.b, c.loc, rows, whole, first.offsets, first.sizes, first.strides));
  }
  return values;
}

/// Each bucket's and start's collectives, started.
FailureOr<Started> startCollectives(CallBuilder &c, AllReduceBucketOp op) {
  return startAllReduces(c, op, op.getAxis(), op.getInputs(), MRT_REDUCE_SUM);
}
FailureOr<Started> startCollectives(CallBuilder &c, ReduceScatterBucketOp op) {
  return startReduceScatters(c, op, op.getAxis(), op.getInputs(),
                             op.getResultTypes());
}
FailureOr<Started> startCollectives(CallBuilder &c, AllReduceStartOp op) {
  return startAllReduces(c, op, op.getAxis(), op.getInputs(),
                         runtimeReduction(op.getKind()));
}
FailureOr<Started> startCollectives(CallBuilder &c, ReduceScatterStartOp op) {
  return startReduceScatters(c, op, op.getAxis(), op.getInputs(),
                             op.getWait()->getResultTypes());
}
FailureOr<Started> startCollectives(CallBuilder &c, AllGatherStartOp op) {
  return startAllGathers(c, op, op.getAxis(), op.getInputs(),
                         op.getWait()->getResultTypes());
}

/// A bucket: its collectives started together, waited for once.
template <typename BucketOp>
struct BucketToRuntime : RuntimePattern<BucketOp> {
  using RuntimePattern<BucketOp>::RuntimePattern;
  LogicalResult matchAndRewrite(BucketOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    FailureOr<Started> started = startCollectives(c, op);
    if (failed(started))
      return failure();
    rewriter.replaceOp(op, waitFor(c, op, *started, op.getResultTypes()));
    return success();
  }
};

/// The start's ticket and buffers travel to its wait in a cast to the
/// pending type, which the wait's lowering takes apart (and which then
/// dies): the buffers must not become tensors before the wait.
template <typename StartOp>
struct StartToRuntime : RuntimePattern<StartOp> {
  using RuntimePattern<StartOp>::RuntimePattern;
  LogicalResult matchAndRewrite(StartOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    FailureOr<Started> started = startCollectives(c, op);
    if (failed(started))
      return failure();
    SmallVector<Value> carried = {started->ticket};
    llvm::append_range(carried, started->buffers);
    rewriter.replaceOpWithNewOp<UnrealizedConversionCastOp>(
        op, op->getResultTypes(), carried);
    return success();
  }
};

struct WaitToRuntime : RuntimePattern<WaitOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(WaitOp op,
                                PatternRewriter &rewriter) const override {
    // A start that could not be lowered said why.
    auto carried = op.getPending().getDefiningOp<UnrealizedConversionCastOp>();
    if (!carried)
      return failure();
    CallBuilder c(rewriter, op.getLoc());
    Started started{carried.getOperand(0),
                    llvm::to_vector(carried.getOperands().drop_front())};
    rewriter.replaceOp(op, waitFor(c, op, started, op.getResultTypes()));
    rewriter.eraseOp(carried);
    return success();
  }
};

struct AxisIndexToRuntime : RuntimePattern<AxisIndexOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(AxisIndexOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<int64_t> runtime = runtimeAxis(op, op.getAxis());
    if (failed(runtime))
      return failure();
    CallBuilder c(rewriter, op.getLoc());
    rewriter.replaceOp(op, axisRank(c, op, *runtime));
    return success();
  }
};

/// This rank's chunk: a slice at rank * size along `dim`.
struct LocalSliceToRuntime : RuntimePattern<LocalSliceOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(LocalSliceOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<int64_t> runtime = runtimeAxis(op, op.getAxis());
    if (failed(runtime))
      return failure();
    CallBuilder c(rewriter, op.getLoc());
    ChunkSlice mine =
        chunkAt(c, op.getType(), op.getDim(), axisRank(c, op, *runtime));
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        op, op.getType(), op.getInput(), mine.offsets, mine.sizes,
        mine.strides);
    return success();
  }
};

/// Only a split of the outermost non-unit dimension is a contiguous
/// concatenation of the ranks' buffers; an all-gather along another one is
/// transposed into place (gatherInner).
bool isOutermost(RankedTensorType type, int64_t dim) {
  return llvm::all_of(type.getShape().take_front(dim),
                      [](int64_t size) { return size == 1; });
}

/// An all-gather or reduce-scatter call moving `local` elements per rank.
template <typename CollectiveOp>
LogicalResult gatherOrScatter(PatternRewriter &rewriter, CollectiveOp op,
                              StringRef runtimeName, RankedTensorType local) {
  if (!isOutermost(op.getType(), op.getDim()))
    return op.emitOpError("along dimension ")
           << op.getDim()
           << " has no runtime lowering; only the outermost dimension";
  FailureOr<int64_t> runtime = runtimeAxis(op, op.getAxis());
  if (failed(runtime))
    return failure();
  CallBuilder c(rewriter, op.getLoc());
  Value in = c.input(op.getInput());
  CallBuilder::Output out = c.output(op.getType());
  c.call(kernel(runtimeName, op.getInput()),
         {CallBuilder::context(op), c.i32(*runtime), in, out.view,
          c.i64(local.getNumElements())});
  rewriter.replaceOp(op, c.tensor(out));
  return success();
}

/// An all-gather along an inner dimension: the ranks' chunks come stacked
/// ([ranks, local...], what the runtime writes), and a transpose puts each
/// at its place along the dimension.
Value gatherInner(PatternRewriter &rewriter, AllGatherOp op,
                  int64_t runtimeAxis) {
  RankedTensorType local = op.getInput().getType();
  int64_t dim = op.getDim();
  int64_t ranks = op.getType().getDimSize(dim) / local.getDimSize(dim);
  SmallVector<int64_t> stacked = {ranks};
  llvm::append_range(stacked, local.getShape());
  CallBuilder c(rewriter, op.getLoc());
  Value in = c.input(op.getInput());
  CallBuilder::Output out = c.output(local.clone(stacked));
  c.call(kernel("mrt_all_gather", op.getInput()),
         {CallBuilder::context(op), c.i32(runtimeAxis), in, out.view,
          c.i64(local.getNumElements())});
  // [ranks, s0, ..., s(n-1)] -> [s0, ..., s(dim-1), ranks, s(dim), ...].
  SmallVector<int64_t> permutation, moved;
  for (int64_t i = 0; i < local.getRank(); ++i) {
    if (i == dim)
      permutation.push_back(0);
    permutation.push_back(i + 1);
  }
  for (int64_t from : permutation)
    moved.push_back(stacked[from]);
  Value init = tensor::EmptyOp::create(rewriter, op.getLoc(), moved,
                                       local.getElementType());
  Value placed = linalg::TransposeOp::create(rewriter, op.getLoc(),
                                             c.tensor(out), init, permutation)
                     .getResult()[0];
  SmallVector<ReassociationIndices> groups;
  for (int64_t i = 0; i < local.getRank(); ++i)
    groups.push_back(i < dim    ? ReassociationIndices{i}
                     : i == dim ? ReassociationIndices{i, i + 1}
                                : ReassociationIndices{i + 1});
  return tensor::CollapseShapeOp::create(rewriter, op.getLoc(), op.getType(),
                                         placed, groups);
}

struct AllGatherToRuntime : RuntimePattern<AllGatherOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(AllGatherOp op,
                                PatternRewriter &rewriter) const override {
    if (isOutermost(op.getType(), op.getDim()))
      return gatherOrScatter(rewriter, op, "mrt_all_gather",
                             op.getInput().getType());
    FailureOr<int64_t> runtime = runtimeAxis(op, op.getAxis());
    if (failed(runtime))
      return failure();
    rewriter.replaceOp(op, gatherInner(rewriter, op, *runtime));
    return success();
  }
};

struct ReduceScatterToRuntime : RuntimePattern<ReduceScatterOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(ReduceScatterOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getKind() != ReductionKind::sum)
      return op.emitOpError("has no runtime lowering for a max reduction");
    return gatherOrScatter(rewriter, op, "mrt_reduce_scatter", op.getType());
  }
};

} // namespace

void megatron::populateCollectiveToRuntimePatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<FToRuntime, AllReduceToRuntime,
               BucketToRuntime<AllReduceBucketOp>,
               BucketToRuntime<ReduceScatterBucketOp>,
               StartToRuntime<AllReduceStartOp>,
               StartToRuntime<ReduceScatterStartOp>,
               StartToRuntime<AllGatherStartOp>, WaitToRuntime, AxisIndexToRuntime,
               LocalSliceToRuntime, AllGatherToRuntime, ReduceScatterToRuntime>(
      patterns.getContext(), target);
}
