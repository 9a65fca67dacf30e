//===- GenerationPatterns.cpp - the KV cache, positions and last tokens ---===//
#include "RuntimeCalls.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;
using namespace mlir::tp;

namespace {

/// The sizes the cache kernels take after their pointers: layer, L, B, T,
/// then `heads` (H, or H and KV), D and N.
SmallVector<Value> cacheSizes(CallBuilder &c, RankedTensorType chunk,
                              Type cacheType, int64_t layer,
                              ArrayRef<int64_t> heads) {
  auto cache = cast<RankedTensorType>(cacheType);
  SmallVector<Value> sizes = {c.i64(layer), c.i64(cache.getDimSize(0)),
                              c.i64(chunk.getDimSize(0)),
                              c.i64(chunk.getDimSize(1))};
  for (int64_t count : heads)
    sizes.push_back(c.i64(count));
  sizes.append({c.i64(cache.getDimSize(4)), c.i64(cache.getDimSize(3))});
  return sizes;
}

/// Every other use of `value` reads it before `op` in its block, or writes
/// the final cache into it (the step's output): a write of `value`'s buffer
/// by `op` in place then changes nothing anyone reads.
bool onlyReadBefore(Value value, Operation *op) {
  return llvm::all_of(value.getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    auto output = dyn_cast<bufferization::MaterializeInDestinationOp>(user);
    if (output && &use == &output.getDestMutable())
      return true;
    return user == op || (user->getBlock() == op->getBlock() &&
                          user->isBeforeInBlock(op));
  });
}

/// The chunk's keys or values written into the cache's buffer: the cache is
/// never copied.
struct KVCacheStoreToRuntime : RuntimePattern<KVCacheStoreOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(KVCacheStoreOp op,
                                PatternRewriter &rewriter) const override {
    if (!onlyReadBefore(op.getCache(), op))
      return rewriter.notifyMatchFailure(
          op, "the cache is read after this update, which writes in place");
    CallBuilder c(rewriter, op.getLoc());
    auto input = op.getInput().getType();
    Value x = c.input(op.getInput()), positions = c.input(op.getPositions());
    // A fused qkv's keys or values are its section-th third.
    int64_t ld = input.getDimSize(2);
    if (std::optional<CacheSection> section = op.getSection())
      x = c.shifted(x, static_cast<int64_t>(*section) * ld / 3);
    CallBuilder::Output cache = c.inPlace(op.getCache());
    SmallVector<Value> args = {x, c.i64(ld), cache.view, positions};
    args.append(cacheSizes(c, input, op.getCache().getType(), op.getLayer(),
                           {static_cast<int64_t>(op.getNumHeads())}));
    c.call(kernel("mrt_kv_cache_store", op.getInput()), args);
    rewriter.replaceOp(op, c.tensor(cache));
    return success();
  }
};

struct CachedAttentionToRuntime : RuntimePattern<CachedAttentionOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(CachedAttentionOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    auto queries = op.getQueries().getType();
    Value q = c.input(op.getQueries()), positions = c.input(op.getPositions());
    Value keys = c.input(op.getKCache()), values = c.input(op.getVCache());
    CallBuilder::Output y = c.output(op.getType());
    // The q section of a fused qkv is its first third, read at its stride.
    SmallVector<Value> args = {q,    c.i64(queries.getDimSize(2)), keys,
                               values, positions,                  y.view};
    args.append(cacheSizes(c, queries, op.getKCache().getType(),
                           op.getLayer(),
                           {static_cast<int64_t>(op.getNumHeads()),
                            op.getKeyValueHeads()}));
    c.call(kernel("mrt_attention_cached", op.getQueries()), args);
    rewriter.replaceOp(op, c.tensor(y));
    return success();
  }
};

/// `index` clamped to [0, size): a gather never reads outside its source
/// (the cache's kernels report a position beyond it).
Value clampIndex(OpBuilder &b, Location loc, Value index, int64_t size) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value last = arith::ConstantIndexOp::create(b, loc, size - 1);
  return arith::MinSIOp::create(
      b, loc, arith::MaxSIOp::create(b, loc, index, zero), last);
}

/// out[b, t, c] = table[positions[b] + t, c].
struct PositionEmbeddingAtToRuntime : RuntimePattern<PositionEmbeddingAtOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(PositionEmbeddingAtOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    int64_t rows = op.getTable().getType().getDimSize(0);
    rewriter.replaceOp(
        op, c.gather(op.getType(), op.getTable(), op.getPositions(),
                     [&](OpBuilder &b, Location loc, ValueRange indices,
                         Value start) -> SmallVector<Value> {
                       Value row = arith::AddIOp::create(b, loc, start,
                                                         indices[1]);
                       return {clampIndex(b, loc, row, rows), indices[2]};
                     }));
    return success();
  }
};

/// out[b, c] = input[b, index[b], c].
struct TakePositionToRuntime : RuntimePattern<TakePositionOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(TakePositionOp op,
                                PatternRewriter &rewriter) const override {
    CallBuilder c(rewriter, op.getLoc());
    int64_t chunk = op.getInput().getType().getDimSize(1);
    rewriter.replaceOp(
        op, c.gather(op.getType(), op.getInput(), op.getIndex(),
                     [&](OpBuilder &b, Location loc, ValueRange indices,
                         Value column) -> SmallVector<Value> {
                       return {indices[0], clampIndex(b, loc, column, chunk),
                               indices[1]};
                     }));
    return success();
  }
};

} // namespace

void megatron::populateGenerationToRuntimePatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target) {
  patterns.add<KVCacheStoreToRuntime, CachedAttentionToRuntime,
               PositionEmbeddingAtToRuntime,
               TakePositionToRuntime>(patterns.getContext(), target);
}
