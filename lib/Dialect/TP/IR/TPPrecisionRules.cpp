//===- TPPrecisionRules.cpp - each op's precision under bf16 --------------===//
//
// PrecisionOpInterface, as llm.c and PyTorch autocast train: activations
// and their gradients in bf16; parameter gradients, statistics, the loss
// and the optimizer in fp32; data movement in whatever arrives.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/IR/TP.h"

using namespace mlir;
using namespace mlir::tp;

namespace {
constexpr Precision L = Precision::Low, F = Precision::Full,
                    K = Precision::Keep;

PrecisionRule low(Operation *op) { return PrecisionRule::uniform(op, L); }
PrecisionRule full(Operation *op) { return PrecisionRule::uniform(op, F); }
PrecisionRule follow(Operation *op) {
  return PrecisionRule::uniform(op, Precision::Follow);
}
/// bf16 logits in, fp32 statistics out.
PrecisionRule statisticsOfLogits(Operation *op) {
  return {{L}, SmallVector<Precision, 1>(op->getNumResults(), F)};
}
} // namespace

// Activations and their gradients.
PrecisionRule MatmulOp::getPrecisionRule() { return low(*this); }
PrecisionRule LayerNormOp::getPrecisionRule() { return low(*this); }
PrecisionRule RMSNormOp::getPrecisionRule() { return low(*this); }
PrecisionRule EmbeddingOp::getPrecisionRule() { return low(*this); }
PrecisionRule PositionEmbeddingOp::getPrecisionRule() { return low(*this); }
/// bf16 q, k, v and result; the dropout key (the hyperparameters) stays.
PrecisionRule AttentionOp::getPrecisionRule() {
  return {SmallVector<Precision, 4>(getInputs().size(), L), {L}};
}
PrecisionRule CachedAttentionOp::getPrecisionRule() { return low(*this); }
PrecisionRule KVCacheStoreOp::getPrecisionRule() { return low(*this); }
PrecisionRule PositionEmbeddingAtOp::getPrecisionRule() { return low(*this); }
PrecisionRule TakePositionOp::getPrecisionRule() { return low(*this); }
PrecisionRule AttentionGradOp::getPrecisionRule() {
  return {SmallVector<Precision, 4>(getInputs().size() + 1, L),
          SmallVector<Precision, 1>(getNumResults(), L)};
}
PrecisionRule DropoutOp::getPrecisionRule() { return {{L}, {L}}; }
PrecisionRule GeluOp::getPrecisionRule() { return low(*this); }
PrecisionRule GeluGradOp::getPrecisionRule() { return low(*this); }
PrecisionRule SwiGLUOp::getPrecisionRule() { return low(*this); }
PrecisionRule RoPEOp::getPrecisionRule() { return low(*this); }
PrecisionRule SwiGLUGradOp::getPrecisionRule() { return low(*this); }
PrecisionRule BiasAddOp::getPrecisionRule() { return low(*this); }

// Parameter gradients accumulate in fp32.
PrecisionRule WeightGradOp::getPrecisionRule() { return {{L, L}, {F}}; }
PrecisionRule EmbeddingGradOp::getPrecisionRule() { return {{L, L}, {F}}; }
PrecisionRule SumToOp::getPrecisionRule() { return {{K}, {F}}; }
// Lowered as an insert into fp32 zeros: the gradient must be fp32.
PrecisionRule PositionEmbeddingGradOp::getPrecisionRule() {
  return {{F}, {F}};
}
PrecisionRule LayerNormGradOp::getPrecisionRule() {
  return {{L, L, L}, {L, F, F}};
}
PrecisionRule RMSNormGradOp::getPrecisionRule() { return {{L, L, L}, {L, F}}; }

// The logits are bf16; maxima, sums and the loss are not.
PrecisionRule XentMaxOp::getPrecisionRule() {
  return statisticsOfLogits(*this);
}
PrecisionRule XentSumExpOp::getPrecisionRule() {
  return statisticsOfLogits(*this);
}
PrecisionRule CrossEntropyOp::getPrecisionRule() {
  return statisticsOfLogits(*this);
}
PrecisionRule XentGradOp::getPrecisionRule() { return {{L}, {L}}; }

// The optimizer updates fp32 masters; softmax's generic lowering
// accumulates its sums in the element type.
PrecisionRule XentLossOp::getPrecisionRule() { return full(*this); }
PrecisionRule SumSquaresOp::getPrecisionRule() { return full(*this); }
PrecisionRule AdamWOp::getPrecisionRule() { return full(*this); }
PrecisionRule SoftmaxOp::getPrecisionRule() { return full(*this); }
PrecisionRule SoftmaxGradOp::getPrecisionRule() { return full(*this); }

// Data movement keeps what arrives.
PrecisionRule AddOp::getPrecisionRule() { return follow(*this); }
PrecisionRule ReshardOp::getPrecisionRule() { return follow(*this); }
PrecisionRule FOp::getPrecisionRule() { return follow(*this); }
PrecisionRule GOp::getPrecisionRule() { return follow(*this); }
PrecisionRule AllReduceOp::getPrecisionRule() { return follow(*this); }

/// Gradients, the only tensors it sums, stay fp32.
PrecisionRule AllReduceBucketOp::getPrecisionRule() {
  return PrecisionRule::uniform(*this, Precision::Full);
}
PrecisionRule ReduceScatterBucketOp::getPrecisionRule() {
  return PrecisionRule::uniform(*this, Precision::Full);
}
PrecisionRule AllGatherOp::getPrecisionRule() { return follow(*this); }
PrecisionRule SPGatherOp::getPrecisionRule() { return follow(*this); }
PrecisionRule ReduceScatterOp::getPrecisionRule() { return follow(*this); }
PrecisionRule LocalSliceOp::getPrecisionRule() { return follow(*this); }
// A conversion states its own types.
PrecisionRule ConvertOp::getPrecisionRule() {
  return PrecisionRule::uniform(*this, K);
}
