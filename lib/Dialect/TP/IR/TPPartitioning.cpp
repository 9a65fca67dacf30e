//===- TPPartitioning.cpp - how ops become one rank's ---------------------===//
//
// ShardingRuleOpInterface::partition of the ops that change beyond their
// types when tp-partition makes the program per-rank. The pass gives every
// value its local type first; these rewrite what the local types alone do
// not say.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::tp;

std::optional<StringRef> PartitionContext::splitAxis(ShardingAttr sharding,
                                                     unsigned dim) {
  if (!sharding)
    return std::nullopt;
  for (StringRef axis : sharding.getDimAxes(dim))
    if (mesh.getAxisSize(axis).value_or(1) > 1)
      return axis;
  return std::nullopt;
}

int64_t PartitionContext::shardCount(ShardingAttr sharding,
                                     unsigned dim) {
  int64_t shards = 1;
  if (sharding)
    for (StringRef axis : sharding.getDimAxes(dim))
      shards *= mesh.getAxisSize(axis).value_or(1);
  return shards;
}

Value PartitionContext::offsetAlong(Location loc, ArrayRef<StringRef> axes,
                                    int64_t localSize) {
  auto constant = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(builder, loc, value);
  };
  Value position;
  for (StringRef axis : axes) {
    Value index = AxisIndexOp::create(builder, loc, meshRef,
                                      builder.getStringAttr(axis));
    position = position ? arith::AddIOp::create(
                              builder, loc,
                              arith::MulIOp::create(
                                  builder, loc, position,
                                  constant(*mesh.getAxisSize(axis))),
                              index)
                        : index;
  }
  if (!position)
    return constant(0);
  return arith::MulIOp::create(builder, loc, position, constant(localSize));
}

Value PartitionContext::rowOffset(Location loc, StringRef axis,
                                  int64_t localSize) {
  return offsetAlong(loc, axis, localSize);
}

Value PartitionContext::dimOffset(Operation *user, ShardingAttr sharding,
                                  unsigned dim, int64_t localSize) {
  SmallVector<StringRef> axes;
  if (sharding)
    for (StringRef axis : sharding.getDimAxes(dim))
      if (mesh.getAxisSize(axis).value_or(1) > 1)
        axes.push_back(axis);
  // A whole dimension starts at 0 whatever its size.
  Value &offset = offsets[{builder.getStrArrayAttr(axes),
                           axes.empty() ? 0 : localSize}];
  if (offset)
    return offset;
  auto function = user->getParentOfType<FunctionOpInterface>();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(&function.getFunctionBody().front());
  offset = offsetAlong(function.getLoc(), axes, localSize);
  return offset;
}

void PartitionContext::replaceOp(Operation *op, Value replacement) {
  Value result = op->getResult(0);
  if (ShardingAttr sharding = shardings.lookup(result))
    shardings[replacement] = sharding;
  shardings.erase(result);
  result.replaceAllUsesWith(replacement);
  op->erase();
}

/// Megatron splits a fused [q|k|v]'s columns per section: whole heads.
int64_t AttentionOp::getColumnSections() {
  return getInputs().size() == 1 ? 3 : 1;
}
int64_t CachedAttentionOp::getColumnSections() { return getKvHeads() ? 1 : 3; }
int64_t KVCacheStoreOp::getColumnSections() { return getSection() ? 3 : 1; }

/// The queries' heads, or the key/value heads of separate k and v.
int64_t AttentionOp::getColumnHeads(unsigned operand) {
  return operand == 0 ? getNumHeads() : getKeyValueHeads();
}
int64_t CachedAttentionOp::getColumnHeads(unsigned) {
  return getNumHeads();
}
int64_t KVCacheStoreOp::getColumnHeads(unsigned) {
  return getNumHeads();
}
int64_t RoPEOp::getColumnHeads(unsigned) { return getNumHeads(); }

/// Ranks share attention by whole heads. The query heads are split among
/// all `tp` ranks; the key/value heads (where the op has them apart) too, or,
/// where there are fewer of them than ranks, each among the tp / kv_heads
/// ranks whose query heads read it.
static LogicalResult verifyHeadsDivide(Operation *op, int64_t heads,
                                       int64_t tp,
                                       std::optional<int64_t> kvHeads = {}) {
  if (heads % tp != 0)
    return op->emitError("tensor-parallel size ")
           << tp << " does not divide the " << heads << " attention heads";
  if (kvHeads && *kvHeads % tp != 0 && tp % *kvHeads != 0)
    return op->emitError("tensor-parallel size ")
           << tp << " neither divides the " << *kvHeads
           << " key/value heads nor is a multiple of them";
  return success();
}

/// An op on the heads of one tensor (q, or k and v) alone: whole heads per
/// rank, or, for key/value heads fewer than the ranks, one head per group
/// of ranks.
static LogicalResult verifyHeadsShared(Operation *op, int64_t heads,
                                       int64_t tp) {
  if (heads % tp != 0 && tp % heads != 0)
    return op->emitError("tensor-parallel size ")
           << tp << " neither divides the " << heads
           << " attention heads nor is a multiple of them";
  return success();
}

LogicalResult AttentionOp::verifyTensorParallelSize(int64_t tp) {
  return verifyHeadsDivide(*this, getNumHeads(), tp, getKeyValueHeads());
}
LogicalResult CachedAttentionOp::verifyTensorParallelSize(int64_t tp) {
  return verifyHeadsDivide(*this, getNumHeads(), tp, getKeyValueHeads());
}
LogicalResult KVCacheStoreOp::verifyTensorParallelSize(int64_t tp) {
  if (getSection())
    return verifyHeadsDivide(*this, getNumHeads(), tp);
  return verifyHeadsShared(*this, getNumHeads(), tp);
}
LogicalResult RoPEOp::verifyTensorParallelSize(int64_t tp) {
  return verifyHeadsShared(*this, getNumHeads(), tp);
}

/// The ranks sharing the heads of `value` (split as it is in `context`)
/// along dimension `dim` (by default its last).
static int64_t headShards(PartitionContext &context, Value value,
                          std::optional<unsigned> dim = {}) {
  return context.shardCount(
      context.shardingOf(value),
      dim.value_or(cast<RankedTensorType>(value.getType()).getRank() - 1));
}

/// Each rank keeps num_heads / N whole query heads and the key/value heads
/// its queries read (and, generating, the caches of those heads).
/// A dropout places the rank's sequences and heads in the global
/// probabilities.
LogicalResult AttentionOp::partition(PartitionContext &context) {
  int64_t globalHeads = getNumHeads();
  setNumHeads(getNumHeads() / headShards(context, getInputs().front()));
  if (getKvHeads())
    setKvHeads(*getKvHeads() / headShards(context, getInputs()[1]));
  if (!getDropout())
    return success();
  if (!getOffsets().empty())
    return emitOpError("is partitioned already: its dropout has offsets");
  ShardingAttr queries = context.shardingOf(getInputs().front());
  int64_t batch = getType().getDimSize(0);
  getOffsetsMutable().assign(
      {context.dimOffset(*this, queries, 0, batch),
       context.dimOffset(*this, queries, getType().getRank() - 1,
                         getNumHeads())});
  setGlobalShape(
      ArrayRef<int64_t>{batch * context.shardCount(queries, 0), globalHeads});
  return success();
}

/// The rank's block starts at its offset along every split dimension.
LogicalResult DropoutOp::partition(PartitionContext &context) {
  if (!getOffsets().empty())
    return emitOpError("is partitioned already: it has offsets");
  ShardingAttr sharding = context.shardingOf(getInput());
  SmallVector<Value> offsets;
  SmallVector<int64_t> global;
  for (auto [dim, size] : llvm::enumerate(getType().getShape())) {
    offsets.push_back(context.dimOffset(*this, sharding, dim, size));
    global.push_back(size * context.shardCount(sharding, dim));
  }
  getOffsetsMutable().assign(offsets);
  setGlobalShape(global);
  return success();
}
LogicalResult CachedAttentionOp::partition(PartitionContext &context) {
  setNumHeads(getNumHeads() / headShards(context, getQueries()));
  // Caches are [layers, batch, heads, positions, head width].
  if (getKvHeads())
    setKvHeads(*getKvHeads() / headShards(context, getKCache(), 2));
  return success();
}
LogicalResult KVCacheStoreOp::partition(PartitionContext &context) {
  setNumHeads(getNumHeads() / headShards(context, getInput()));
  return success();
}
/// Each rank rotates its own whole heads.
LogicalResult RoPEOp::partition(PartitionContext &context) {
  setNumHeads(getNumHeads() / headShards(context, getInput()));
  return success();
}

/// A rank's table holds rows [offset, offset + rows) of the vocabulary.
LogicalResult EmbeddingOp::partition(PartitionContext &context) {
  std::optional<StringRef> axis =
      context.splitAxis(context.shardingOf(getTable()), 0);
  if (!axis)
    return success();
  OpBuilder &b = context.getBuilder();
  b.setInsertionPoint(*this);
  getOffsetMutable().assign(
      context.rowOffset(getLoc(), *axis, getTable().getType().getDimSize(0)));
  return success();
}

CrossEntropyPieces tp::buildCrossEntropyPieces(OpBuilder &b,
                                               CrossEntropyOp loss,
                                               Value offset,
                                               FlatSymbolRefAttr mesh,
                                               std::optional<StringRef> axis,
                                               IntegerAttr meanOver) {
  Location loc = loss.getLoc();
  auto allReduce = [&](Value value, ReductionKind kind) -> Value {
    if (!axis)
      return value;
    return AllReduceOp::create(b, loc, value,
                               ReductionKindAttr::get(b.getContext(), kind),
                               mesh, b.getStringAttr(*axis));
  };
  auto logits = loss.getLogits().getType();
  auto tokens = RankedTensorType::get(logits.getShape().drop_back(),
                                      loss.getType().getElementType());
  int64_t valid = loss.getValidVocab();
  auto localMax =
      XentMaxOp::create(b, loc, tokens, loss.getLogits(), offset, valid);
  Value max = allReduce(localMax, ReductionKind::max);
  auto sums = XentSumExpOp::create(b, loc, loss.getLogits(), max,
                                   loss.getTargets(), offset,
                                   b.getI64IntegerAttr(valid));
  Value sumExp = allReduce(sums.getSumExp(), ReductionKind::sum);
  Value target = allReduce(sums.getTargetLogit(), ReductionKind::sum);
  auto result = XentLossOp::create(b, loc, loss.getType(), sumExp, max, target,
                                   meanOver);
  return {localMax, sums, result};
}

/// Megatron's vocabulary-parallel cross-entropy: the logits stay split,
/// only per-token [B, T] statistics cross ranks. Unsplit logits take the
/// same pieces without the all-reduces, so training has one gradient rule.
LogicalResult CrossEntropyOp::partition(PartitionContext &context) {
  auto logits = getLogits().getType();
  unsigned vocabDim = logits.getRank() - 1;
  std::optional<StringRef> axis =
      context.splitAxis(context.shardingOf(getLogits()), vocabDim);
  OpBuilder &b = context.getBuilder();
  b.setInsertionPoint(*this);
  Value offset =
      axis ? context.rowOffset(getLoc(), *axis, logits.getDimSize(vocabDim))
           : arith::ConstantIndexOp::create(b, getLoc(), 0).getResult();
  // Tokens split across ranks (data parallelism): each rank's mean is its
  // share of the whole batch's, summed by the g over them.
  ShardingAttr tokens = context.shardingOf(getTargets());
  int64_t localTokens = getTargets().getType().getNumElements();
  int64_t allTokens = localTokens;
  for (unsigned dim = 0, e = getTargets().getType().getRank(); dim < e; ++dim)
    allTokens *= context.shardCount(tokens, dim);
  IntegerAttr meanOver =
      allTokens == localTokens ? IntegerAttr() : b.getI64IntegerAttr(allTokens);
  CrossEntropyPieces pieces = buildCrossEntropyPieces(
      b, *this, offset, context.getMeshRef(), axis, meanOver);
  context.replaceOp(*this, pieces.loss.getResult());
  return success();
}

/// A reshard becomes an all-gather of each dimension that stops being
/// split and a local slice of each that starts being split.
LogicalResult ReshardOp::partition(PartitionContext &context) {
  ShardingAttr from = context.shardingOf(getInput());
  ShardingAttr to = context.shardingOf(getResult());
  OpBuilder &b = context.getBuilder();
  b.setInsertionPoint(*this);
  StringRef mesh = context.getMeshRef().getValue();
  Value value = getInput();
  for (unsigned dim = 0, e = getType().getRank(); dim < e; ++dim) {
    std::optional<StringRef> before = context.splitAxis(from, dim);
    std::optional<StringRef> after = context.splitAxis(to, dim);
    if (before == after)
      continue;
    if ((before && from.getDimSections(dim) != 1) ||
        (after && to.getDimSections(dim) != 1))
      return emitOpError("cannot reshard a dimension split into sections");
    auto type = cast<RankedTensorType>(value.getType());
    SmallVector<int64_t> shape(type.getShape());
    if (before) {
      shape[dim] *= *context.getMesh().getAxisSize(*before);
      value = AllGatherOp::create(b, getLoc(), type.clone(shape), value, mesh,
                                  *before, dim);
      type = cast<RankedTensorType>(value.getType());
    }
    if (after) {
      shape[dim] /= *context.getMesh().getAxisSize(*after);
      value = LocalSliceOp::create(b, getLoc(), type.clone(shape), value, mesh,
                                   *after, dim);
    }
  }
  context.replaceOp(*this, value);
  return success();
}
