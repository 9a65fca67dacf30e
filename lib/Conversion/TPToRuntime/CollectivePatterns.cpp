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

/// Only a split of the outermost non-unit dimension is a contiguous
/// concatenation of the ranks' buffers; an all-gather along another one is
/// transposed into place (gatherInner).
bool isOutermost(RankedTensorType type, int64_t dim) {
  return llvm::all_of(type.getShape().take_front(dim),
                      [](int64_t size) { return size == 1; });
}

/// This rank's chunk: a slice at rank * size along `dim`. A chunk along an
/// inner dimension is strided in its tensor: it is copied out, as the
/// runtime's kernels read contiguous rows (and one-shot bufferization
/// cannot allocate a copy of a view with a dynamic offset where a reader
/// asks for it later). So is one along a dimension after unit ones (a
/// micro-batch of one sequence split along the sequence): contiguous, but
/// its view keeps the whole tensor's strides, which a reader's contiguous
/// layout does not match.
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
    Value chunk = tensor::ExtractSliceOp::create(
        rewriter, op.getLoc(), op.getType(), op.getInput(), mine.offsets,
        mine.sizes, mine.strides);
    if (op.getDim() != 0) {
      Value contiguous = tensor::EmptyOp::create(
          rewriter, op.getLoc(), op.getType().getShape(),
          op.getType().getElementType());
      chunk = linalg::CopyOp::create(rewriter, op.getLoc(), chunk, contiguous)
                  .getResult(0);
    }
    rewriter.replaceOp(op, chunk);
    return success();
  }
};

/// An all-gather or reduce-scatter along the outermost dimension: one call
/// moving `local` elements per rank.
template <typename CollectiveOp>
LogicalResult gatherOrScatter(PatternRewriter &rewriter, CollectiveOp op,
                              StringRef runtimeName, RankedTensorType local) {
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

/// A tensor with a split dimension `dim`, viewed in three: the dimensions
/// before it (`outer` elements), the ranks' chunks, and each chunk's part
/// of the rest (`inner` = the chunk's extent along `dim` times the later
/// dimensions). Each rank's chunk is [outer, inner]; the runtime's gathers
/// and scatters move [ranks, outer, inner], the tensor is [outer, ranks,
/// inner]. Three dimensions keep the transposes between the two within
/// what the CUDA target maps onto a grid.
struct RankChunks {
  int64_t outer = 1, ranks, inner = 1;
  RankChunks(RankedTensorType chunk, int64_t dim, int64_t ranks)
      : ranks(ranks) {
    for (int64_t i = 0; i < chunk.getRank(); ++i)
      (i < dim ? outer : inner) *= chunk.getDimSize(i);
  }
  RankedTensorType byRank(Type element) const {
    return RankedTensorType::get({ranks, outer, inner}, element);
  }
  RankedTensorType inPlace(Type element) const {
    return RankedTensorType::get({outer, ranks, inner}, element);
  }
};

/// `value` reshaped to `type` (same elements, row-major) through its flat
/// form.
Value reshapeThroughFlat(PatternRewriter &rewriter, Location loc, Value value,
                         RankedTensorType type) {
  auto from = cast<RankedTensorType>(value.getType());
  auto flat = RankedTensorType::get({from.getNumElements()},
                                    from.getElementType());
  auto all = [](int64_t rank) {
    ReassociationIndices group;
    for (int64_t i = 0; i < rank; ++i)
      group.push_back(i);
    return SmallVector<ReassociationIndices>{group};
  };
  if (from.getRank() != 1)
    value = tensor::CollapseShapeOp::create(rewriter, loc, flat, value,
                                            all(from.getRank()));
  if (type.getRank() == 1)
    return value;
  return tensor::ExpandShapeOp::create(rewriter, loc, type, value,
                                       all(type.getRank()));
}

/// [a, b, c] -> [b, a, c].
Value swapLeadingDims(PatternRewriter &rewriter, Location loc, Value value,
                      RankedTensorType to) {
  Value init = tensor::EmptyOp::create(rewriter, loc, to.getShape(),
                                       to.getElementType());
  return linalg::TransposeOp::create(rewriter, loc, value, init,
                                     ArrayRef<int64_t>{1, 0, 2})
      .getResult()[0];
}

/// An all-gather along an inner dimension: the ranks' chunks come stacked
/// ([ranks, outer, inner], what the runtime writes), and a transpose puts
/// each at its place along the dimension.
template <typename GatherOp>
Value gatherInner(PatternRewriter &rewriter, GatherOp op,
                  int64_t runtimeAxis) {
  RankedTensorType local = op.getInput().getType();
  int64_t dim = op.getDim();
  RankChunks chunks(local, dim,
                    op.getType().getDimSize(dim) / local.getDimSize(dim));
  Type element = local.getElementType();
  CallBuilder c(rewriter, op.getLoc());
  Value in = c.input(op.getInput());
  CallBuilder::Output out = c.output(chunks.byRank(element));
  c.call(kernel("mrt_all_gather", op.getInput()),
         {CallBuilder::context(op), c.i32(runtimeAxis), in, out.view,
          c.i64(local.getNumElements())});
  Value placed = swapLeadingDims(rewriter, op.getLoc(), c.tensor(out),
                                 chunks.inPlace(element));
  return reshapeThroughFlat(rewriter, op.getLoc(), placed, op.getType());
}

/// tp.all_gather, and sequence parallelism's tp.sp_gather (the same
/// forward).
template <typename GatherOp>
struct AllGatherToRuntime : RuntimePattern<GatherOp> {
  using RuntimePattern<GatherOp>::RuntimePattern;
  LogicalResult matchAndRewrite(GatherOp op,
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

/// A reduce-scatter along an inner dimension: each rank's chunks are
/// transposed to the front ([ranks, outer, inner], what the runtime
/// scatters by), then reduce-scattered.
Value scatterInner(PatternRewriter &rewriter, ReduceScatterOp op,
                   int64_t runtimeAxis) {
  RankedTensorType local = op.getType();
  int64_t dim = op.getDim();
  RankChunks chunks(local, dim,
                    op.getInput().getType().getDimSize(dim) /
                        local.getDimSize(dim));
  Type element = local.getElementType();
  Location loc = op.getLoc();
  Value inPlace = reshapeThroughFlat(rewriter, loc, op.getInput(),
                                     chunks.inPlace(element));
  Value byRank =
      swapLeadingDims(rewriter, loc, inPlace, chunks.byRank(element));
  CallBuilder c(rewriter, loc);
  Value in = c.input(byRank);
  CallBuilder::Output out = c.output(local);
  c.call(kernel("mrt_reduce_scatter", op.getInput()),
         {CallBuilder::context(op), c.i32(runtimeAxis), in, out.view,
          c.i64(local.getNumElements())});
  return c.tensor(out);
}

struct ReduceScatterToRuntime : RuntimePattern<ReduceScatterOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(ReduceScatterOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getKind() != ReductionKind::sum)
      return op.emitOpError("has no runtime lowering for a max reduction");
    if (isOutermost(op.getInput().getType(), op.getDim()))
      return gatherOrScatter(rewriter, op, "mrt_reduce_scatter", op.getType());
    FailureOr<int64_t> runtime = runtimeAxis(op, op.getAxis());
    if (failed(runtime))
      return failure();
    rewriter.replaceOp(op, scatterInner(rewriter, op, *runtime));
    return success();
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
               LocalSliceToRuntime, AllGatherToRuntime<AllGatherOp>,
               AllGatherToRuntime<SPGatherOp>, ReduceScatterToRuntime>(
      patterns.getContext(), target);
}
