//===- TPShardingRules.cpp - how each tp op may be split ------------------===//
//
// One rule per op; see ShardingRule.h. The rules encode Megatron's
// parallelism: a matmul split along its contracted dimension leaves partial
// sums, attention splits by whole heads of q, k and v, normalisation and
// attention keep their reduced dimensions whole.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/IR/TP.h"

using namespace mlir;
using namespace mlir::tp;

using Dims = ShardingRule::TensorDims;

static int64_t rankOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getRank();
}

ShardingRule EmbeddingOp::getShardingRule() {
  ShardingRule rule;
  // Splitting the vocabulary leaves each rank with the rows of its ids only:
  // a partial sum, completed by a tp.g.
  int64_t vocab = rule.addFactor(/*reduction=*/true);
  int64_t width = rule.addFactor();
  Dims ids = rule.addFactors(rankOf(getIds()));
  Dims result = ids;
  result.push_back({width, 1});
  rule.operands = {{{vocab, 1}, {width, 1}}, ids};
  rule.results = {result};
  return rule;
}

ShardingRule PositionEmbeddingOp::getShardingRule() {
  ShardingRule rule;
  int64_t width = rule.addFactor();
  rule.operands = {{{ShardingRule::kWhole, 1}, {width, 1}}};
  rule.results = {{{ShardingRule::kWhole, 1}, {width, 1}}};
  return rule;
}

/// A norm over the last dimension of `input`: that dimension whole, the
/// others one factor each, its `params` [C] vectors replicated.
static ShardingRule normRule(Value input, int64_t params) {
  ShardingRule rule;
  Dims dims = rule.addFactors(rankOf(input) - 1);
  dims.push_back({ShardingRule::kWhole, 1});
  rule.operands = {dims};
  rule.operands.append(params, Dims{{ShardingRule::kWhole, 1}});
  rule.results = {dims};
  return rule;
}

ShardingRule LayerNormOp::getShardingRule() { return normRule(getInput(), 2); }

ShardingRule RMSNormOp::getShardingRule() { return normRule(getInput(), 1); }

ShardingRule MatmulOp::getShardingRule() {
  ShardingRule rule;
  int64_t lhsRank = rankOf(getLhs());
  Dims batch = rule.addFactors(lhsRank - 2);
  int64_t m = rule.addFactor();
  int64_t n = rule.addFactor();
  int64_t k = rule.addFactor(/*reduction=*/true);
  auto matrix = [&](int64_t rows, int64_t cols, bool transposed,
                    bool batched) {
    Dims dims = batched ? batch : Dims();
    if (transposed)
      std::swap(rows, cols);
    dims.append({{rows, 1}, {cols, 1}});
    return dims;
  };
  rule.operands = {matrix(m, k, getTransposeLhs(), true),
                   matrix(k, n, getTransposeRhs(), rankOf(getRhs()) > 2)};
  rule.results = {matrix(m, n, false, true)};
  return rule;
}

ShardingRule AddOp::getShardingRule() {
  return ShardingRule::elementwise(2, rankOf(getResult()));
}

ShardingRule ConvertOp::getShardingRule() {
  return ShardingRule::elementwise(1, rankOf(getResult()));
}

ShardingRule GeluOp::getShardingRule() {
  return ShardingRule::elementwise(1, rankOf(getResult()));
}

ShardingRule DropoutOp::getShardingRule() {
  return ShardingRule::elementwise(1, rankOf(getResult()));
}

ShardingRule SwiGLUOp::getShardingRule() {
  return ShardingRule::elementwise(2, rankOf(getResult()));
}

ShardingRule BiasAddOp::getShardingRule() {
  ShardingRule rule = ShardingRule::elementwise(1, rankOf(getInput()));
  Dims input = rule.operands.front();
  rule.operands.push_back(Dims(input.end() - rankOf(getBias()), input.end()));
  return rule;
}

/// The heads' dimension of attention's inputs: a fused qkv's three
/// sections split one by one, or q, k and v each split by whole heads.
static int64_t headSections(bool fused) { return fused ? 3 : 1; }

/// The query heads' dimension of grouped-query attention: the key/value
/// head (`kvHeads` of them, shared with the keys and values), then the
/// query head inside its group. Ranks that divide the key/value heads own
/// whole groups; more ranks than key/value heads (a multiple) split each
/// group's query heads among the ranks that share its key/value head.
static ShardingRule::Dim queryHeads(int64_t kvHeadsFactor,
                                    int64_t groupFactor, int64_t kvHeads) {
  return {kvHeadsFactor, 1, groupFactor, kvHeads};
}

ShardingRule AttentionOp::getShardingRule() {
  ShardingRule rule;
  int64_t batch = rule.addFactor();
  int64_t heads = rule.addFactor();
  // Every query attends to every earlier key: the sequence stays whole.
  Dims input = {{batch, 1},
                {ShardingRule::kWhole, 1},
                {heads, headSections(getInputs().size() == 1)}};
  rule.operands.assign(getInputs().size(), input);
  rule.results = {{{batch, 1}, {ShardingRule::kWhole, 1}, {heads, 1}}};
  if (getInputs().size() == 1)
    return rule;
  int64_t group = rule.addFactor();
  rule.operands[0][2] = queryHeads(heads, group, getKeyValueHeads());
  rule.results[0][2] = rule.operands[0][2];
  return rule;
}

/// A generation op's operands by whole heads, as tp.attention's: its chunk
/// (a fused qkv's sections split one by one), the caches of the same heads
/// (every layer, position and head width whole) and the positions of each
/// sequence; `caches` of them.
static ShardingRule cacheRule(bool fused, int64_t caches) {
  ShardingRule rule;
  int64_t batch = rule.addFactor();
  int64_t heads = rule.addFactor();
  Dims cache = {{ShardingRule::kWhole, 1},
                {batch, 1},
                {heads, 1},
                {ShardingRule::kWhole, 1},
                {ShardingRule::kWhole, 1}};
  rule.operands = {
      {{batch, 1}, {ShardingRule::kWhole, 1}, {heads, headSections(fused)}}};
  rule.operands.append(caches, cache);
  rule.operands.push_back({{batch, 1}});
  rule.results = {cache};
  return rule;
}

ShardingRule KVCacheStoreOp::getShardingRule() {
  return cacheRule(getSection().has_value(), 1);
}

ShardingRule CachedAttentionOp::getShardingRule() {
  ShardingRule rule = cacheRule(!getKvHeads(), 2);
  ShardingRule::Dim heads = {rule.operands[0][2].factor, 1};
  if (getKvHeads()) {
    heads = queryHeads(heads.factor, rule.addFactor(), *getKvHeads());
    rule.operands[0][2] = heads;
  }
  rule.results = {{rule.operands[0][0], {ShardingRule::kWhole, 1}, heads}};
  return rule;
}

ShardingRule RoPEOp::getShardingRule() {
  ShardingRule rule;
  int64_t batch = rule.addFactor();
  int64_t heads = rule.addFactor();
  // A token's angle is its position: the sequence stays whole.
  Dims dims = {{batch, 1}, {ShardingRule::kWhole, 1}, {heads, 1}};
  rule.operands = {dims};
  if (getPositions())
    rule.operands.push_back({{batch, 1}});
  rule.results = {dims};
  return rule;
}

ShardingRule PositionEmbeddingAtOp::getShardingRule() {
  ShardingRule rule;
  int64_t batch = rule.addFactor();
  int64_t width = rule.addFactor();
  rule.operands = {{{ShardingRule::kWhole, 1}, {width, 1}}, {{batch, 1}}};
  rule.results = {{{batch, 1}, {ShardingRule::kWhole, 1}, {width, 1}}};
  return rule;
}

ShardingRule TakePositionOp::getShardingRule() {
  ShardingRule rule;
  int64_t batch = rule.addFactor();
  int64_t width = rule.addFactor();
  rule.operands = {{{batch, 1}, {ShardingRule::kWhole, 1}, {width, 1}},
                   {{batch, 1}}};
  rule.results = {{{batch, 1}, {width, 1}}};
  return rule;
}

ShardingRule SoftmaxOp::getShardingRule() {
  ShardingRule rule = ShardingRule::elementwise(1, rankOf(getInput()));
  rule.operands[0][getDim()].factor = ShardingRule::kWhole;
  rule.results[0][getDim()].factor = ShardingRule::kWhole;
  return rule;
}

ShardingRule CrossEntropyOp::getShardingRule() {
  ShardingRule rule;
  // The mean reduces over the tokens: split ones (data parallelism) leave
  // each rank its share of the mean, a partial sum completed over them.
  Dims tokens;
  for (int64_t i = 0, e = rankOf(getTargets()); i < e; ++i)
    tokens.push_back({rule.addFactor(/*reduction=*/true), 1});
  // Vocabulary-parallel cross-entropy all-reduces its max, target logit and
  // sum of exponentials itself: the logits are never gathered.
  int64_t vocab = rule.addFactor(/*reduction=*/true, /*absorbed=*/true);
  Dims logits = tokens;
  logits.push_back({vocab, 1});
  rule.operands = {logits, tokens};
  rule.results = {{}};
  return rule;
}

ShardingRule FOp::getShardingRule() {
  return ShardingRule::elementwise(1, rankOf(getResult()));
}

ShardingRule GOp::getShardingRule() {
  ShardingRule rule = ShardingRule::elementwise(1, rankOf(getResult()));
  rule.consumesPartial = true;
  return rule;
}

ShardingRule ReshardOp::getShardingRule() {
  return ShardingRule::elementwise(1, rankOf(getResult()));
}
