//===- TPVJPs.cpp - vector-Jacobian products of the tp ops ----------------===//
//
// Each rule emits the backward ops of one forward op on the per-rank
// program. Megatron's conjugates are the two smallest rules: f's gradient is
// an all-reduce over its axis, g's the identity.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::tp;

using Accumulate = function_ref<void(Value, Value)>;

LogicalResult MatmulOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 Accumulate accumulate) {
  Value grad = resultGrads[0];
  if (getTransposeLhs() || getRhs().getType().getRank() != 2)
    return emitOpError("has no gradient rule with transpose_lhs or a batched "
                       "rhs; the rule covers products with [K, N] weights");
  Location loc = getLoc();
  // Y = X W (or X W^T): dX = dY W^T (or dY W).
  accumulate(getLhs(), MatmulOp::create(b, loc, getLhs().getType(), grad,
                                        getRhs(), /*transpose_lhs=*/false,
                                        /*transpose_rhs=*/!getTransposeRhs()));
  // dW = X^T dY summed over rows (or dY^T X for a [N, K] weight).
  Value weightGrad =
      getTransposeRhs()
          ? WeightGradOp::create(b, loc, getRhs().getType(), grad, getLhs())
          : WeightGradOp::create(b, loc, getRhs().getType(), getLhs(), grad);
  accumulate(getRhs(), weightGrad);
  return success();
}

LogicalResult AddOp::buildVJP(OpBuilder &, ArrayRef<Value> resultGrads,
                              Accumulate accumulate) {
  accumulate(getLhs(), resultGrads[0]);
  accumulate(getRhs(), resultGrads[0]);
  return success();
}

LogicalResult BiasAddOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  Accumulate accumulate) {
  accumulate(getInput(), resultGrads[0]);
  accumulate(getBias(), SumToOp::create(b, getLoc(), getBias().getType(),
                                        resultGrads[0]));
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                               Accumulate accumulate) {
  accumulate(getInput(),
             GeluGradOp::create(b, getLoc(), getInput(), resultGrads[0]));
  return success();
}

/// The same mask, drawn again, on the gradient.
LogicalResult DropoutOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  Accumulate accumulate) {
  accumulate(getInput(),
             DropoutOp::create(b, getLoc(), resultGrads[0], getDropoutAttr(),
                               getStream(), getKey(), getOffsets(),
                               getGlobalShapeAttr()));
  return success();
}

LogicalResult SwiGLUOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 Accumulate accumulate) {
  auto grads = SwiGLUGradOp::create(b, getLoc(), getGate(), getUp(),
                                    resultGrads[0]);
  accumulate(getGate(), grads.getGateGrad());
  accumulate(getUp(), grads.getUpGrad());
  return success();
}

/// A rotation's transpose is the rotation by the negated angle.
LogicalResult RoPEOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                               Accumulate accumulate) {
  accumulate(getInput(),
             RoPEOp::create(b, getLoc(), resultGrads[0].getType(),
                            resultGrads[0], getPositions(), getNumHeadsAttr(),
                            getThetaAttr(),
                            getInverse() ? UnitAttr() : b.getUnitAttr()));
  return success();
}

LogicalResult SoftmaxOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  Accumulate accumulate) {
  accumulate(getInput(), SoftmaxGradOp::create(b, getLoc(), getResult(),
                                               resultGrads[0], getDimAttr()));
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    Accumulate accumulate) {
  auto weight = getWeight().getType();
  auto grads = LayerNormGradOp::create(b, getLoc(), getInput().getType(),
                                       weight, weight, getInput(), getWeight(),
                                       resultGrads[0], getEpsilonAttr());
  accumulate(getInput(), grads.getInputGrad());
  accumulate(getWeight(), grads.getWeightGrad());
  accumulate(getBias(), grads.getBiasGrad());
  return success();
}

LogicalResult RMSNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  Accumulate accumulate) {
  auto grads = RMSNormGradOp::create(b, getLoc(), getInput().getType(),
                                     getWeight().getType(), getInput(),
                                     getWeight(), resultGrads[0],
                                     getEpsilonAttr());
  accumulate(getInput(), grads.getInputGrad());
  accumulate(getWeight(), grads.getWeightGrad());
  return success();
}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    Accumulate accumulate) {
  auto grads = AttentionGradOp::create(
      b, getLoc(), getInputs().getTypes(), resultGrads[0], getInputs(),
      getNumHeadsAttr(), getKvHeadsAttr(), getDropoutAttr(), getStream(),
      getKey(), getOffsets(), getGlobalShapeAttr());
  for (auto [input, grad] : llvm::zip(getInputs(), grads.getInputGrads()))
    accumulate(input, grad);
  return success();
}

LogicalResult EmbeddingOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    Accumulate accumulate) {
  accumulate(getTable(),
             EmbeddingGradOp::create(b, getLoc(), getTable().getType(),
                                     resultGrads[0], getIds(), getOffset()));
  return success();
}

LogicalResult PositionEmbeddingOp::buildVJP(OpBuilder &b,
                                            ArrayRef<Value> resultGrads,
                                            Accumulate accumulate) {
  accumulate(getTable(), PositionEmbeddingGradOp::create(
                             b, getLoc(), getTable().getType(), resultGrads[0]));
  return success();
}

/// The loss's gradient flows straight to the logits: the max and the sum of
/// exponentials are statistics of the logits, whose own dependence on them
/// cancels in (softmax - onehot). No communication is needed.
LogicalResult XentLossOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   Accumulate accumulate) {
  auto producerOf = [](Value value) -> Operation * {
    Operation *op = value.getDefiningOp();
    if (auto allReduce = dyn_cast_or_null<AllReduceOp>(op))
      op = allReduce.getInput().getDefiningOp();
    return op;
  };
  auto sums = dyn_cast_or_null<XentSumExpOp>(producerOf(getSumExp()));
  if (!sums)
    return emitOpError("has no gradient rule unless its sum of exponentials "
                       "comes from tp.xent_sum_exp");
  accumulate(sums.getLogits(),
             XentGradOp::create(b, getLoc(), sums.getLogits().getType(),
                                sums.getLogits(), getMax(), getSumExp(),
                                sums.getTargets(), resultGrads[0],
                                sums.getOffset(), sums.getValidVocabAttr(),
                                getMeanOverAttr()));
  return success();
}

LogicalResult FOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                            Accumulate accumulate) {
  accumulate(getInput(),
             AllReduceOp::create(b, getLoc(), resultGrads[0],
                                 ReductionKindAttr::get(getContext(),
                                                        ReductionKind::sum),
                                 getMeshAttr(), getAxisAttr()));
  return success();
}

LogicalResult GOp::buildVJP(OpBuilder &, ArrayRef<Value> resultGrads,
                            Accumulate accumulate) {
  accumulate(getInput(), resultGrads[0]);
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//
// The cotangent of a value the ranks hold alike is complete on every rank:
// f is where the partial cotangents of a split region are summed into it.
// Under that convention each collective's VJP is its adjoint data movement.
// (Sequence parallelism's all-gather into a split region has a partial
// cotangent, as f has; it is a conjugate of its own, whose VJP is a
// reduce-scatter.)
//===----------------------------------------------------------------------===//

/// A sum over ranks into a value they hold alike: every rank's addend gets
/// the whole cotangent (g's rule). A maximum has none to give: the loss's
/// statistics take their gradient through xent_loss's rule instead.
LogicalResult AllReduceOp::buildVJP(OpBuilder &, ArrayRef<Value> resultGrads,
                                    Accumulate accumulate) {
  if (getKind() != ReductionKind::sum)
    return emitOpError("has no gradient rule for a max reduction");
  accumulate(getInput(), resultGrads[0]);
  return success();
}

/// Each rank's chunk of the assembled cotangent.
LogicalResult AllGatherOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    Accumulate accumulate) {
  accumulate(getInput(),
             LocalSliceOp::create(b, getLoc(), getInput().getType(),
                                  resultGrads[0], getMeshAttr(), getAxisAttr(),
                                  getDimAttr()));
  return success();
}

/// `op`'s input gets the ranks' chunks of the cotangent `grad`, assembled
/// along the dimension `op` split.
template <typename OpTy>
static void accumulateGathered(OpBuilder &b, OpTy op, Value grad,
                               Accumulate accumulate) {
  accumulate(op.getInput(),
             AllGatherOp::create(b, op.getLoc(), op.getInput().getType(), grad,
                                 op.getMeshAttr(), op.getAxisAttr(),
                                 op.getDimAttr()));
}

/// The gathered value's cotangent is partial on each rank (it entered a
/// split region): its sum over the ranks, of which each keeps its chunk.
LogicalResult SPGatherOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   Accumulate accumulate) {
  accumulate(getInput(),
             ReduceScatterOp::create(
                 b, getLoc(), getInput().getType(), resultGrads[0],
                 ReductionKindAttr::get(b.getContext(), ReductionKind::sum),
                 getMeshAttr(), getAxisAttr(), getDimAttr()));
  return success();
}

/// Every rank's addend gets the cotangent of the whole sum: the ranks'
/// chunks, assembled.
LogicalResult ReduceScatterOp::buildVJP(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        Accumulate accumulate) {
  if (getKind() != ReductionKind::sum)
    return emitOpError("has no gradient rule for a max reduction");
  accumulateGathered(b, *this, resultGrads[0], accumulate);
  return success();
}

/// The whole tensor's cotangent: the ranks' chunks, assembled.
LogicalResult LocalSliceOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     Accumulate accumulate) {
  accumulateGathered(b, *this, resultGrads[0], accumulate);
  return success();
}
