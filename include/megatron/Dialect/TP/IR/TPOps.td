//===- TPOps.td - tp dialect operations --------------------*- tablegen -*-===//
#ifndef MEGATRON_DIALECT_TP_IR_TPOPS_TD
#define MEGATRON_DIALECT_TP_IR_TPOPS_TD

include "megatron/Dialect/TP/IR/TPBase.td"
include "megatron/Dialect/TP/IR/TPAttrs.td"
include "mlir/IR/OpBase.td"
include "megatron/Dialect/TP/IR/TPInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def TP_MeshOp : TP_Op<"mesh", [Symbol]> {
  let summary = "A named device mesh with named axes";
  let description = [{
    ```mlir
    tp.mesh @m axes = ["dp" = 1, "tp" = 4]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$axis_sizes);
  let assemblyFormat = [{
    $sym_name `axes` `=` custom<MeshAxes>($axis_names, $axis_sizes) attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Size of `axis`, or nullopt when the mesh has no such axis.
    std::optional<int64_t> getAxisSize(::llvm::StringRef axis);
  }];
}

//===----------------------------------------------------------------------===//
// Transformer ops (global shapes until tp-partition makes them local)
//===----------------------------------------------------------------------===//

def TP_EmbeddingOp : TP_Op<"embedding", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface, ["partition"]>]> {
  let summary = "Token embedding: rows of a [V, C] table gathered by id";
  let description = [{
    With `offset`, the table holds the rows [offset, offset + V) of a
    vocabulary split across ranks: ids outside that range give zero rows,
    and the sum over ranks (a `tp.g`) completes the embedding.
  }];
  let arguments = (ins TP_FloatTensor:$table, TP_IndexTensor:$ids,
                       Optional<Index>:$offset);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $table `[` $ids `]` (`offset` $offset^)? attr-dict `:` type($table) `,`
    type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TP_PositionEmbeddingOp : TP_Op<"position_embedding", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>]> {
  let summary = "Position embedding: the first T rows of a [N, C] table";
  let arguments = (ins TP_FloatTensor:$table);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$table attr-dict `:` type($table) `->` type($result)";
  let hasVerifier = 1;
}

def TP_LayerNormOp : TP_Op<"layer_norm", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>,
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["weight", "bias"]>]> {
  let summary = "Layer normalisation over the last dimension";
  let arguments = (ins TP_FloatTensor:$input, TP_FloatTensor:$weight,
                       TP_FloatTensor:$bias,
                       DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def TP_MatmulOp : TP_Op<"matmul", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>]> {
  let summary = "Batched matrix product with optional transposes";
  let description = [{
    `lhs` is `[batch..., M, K]` (`[batch..., K, M]` with `transpose_lhs`),
    `rhs` is `[K, N]` shared by every batch, or `[batch..., K, N]`
    (last two dims swapped with `transpose_rhs`); the result is
    `[batch..., M, N]`.
  }];
  let arguments = (ins TP_FloatTensor:$lhs, TP_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TP_AddOp : TP_Op<"add", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, SameOperandsAndResultType]> {
  let summary = "Elementwise sum (the residual connection)";
  let arguments = (ins TP_FloatTensor:$lhs, TP_FloatTensor:$rhs);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def TP_BiasAddOp : TP_Op<"bias_add", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, AllTypesMatch<["input", "result"]>]> {
  let summary = "Adds a bias broadcast over the leading dimensions";
  let description = [{
    The bias's shape is a suffix of the input's: a `[C]` bias on `[B, T, C]`,
    or the `[T, C]` position embedding on `[B, T, C]`.
  }];
  let arguments = (ins TP_FloatTensor:$input, TP_FloatTensor:$bias);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input `,` $bias attr-dict `:` type($input) `,` type($bias)";
  let hasVerifier = 1;
}

def TP_GeluOp : TP_Op<"gelu", [TP_MegatronRegionOpInterface, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, SameOperandsAndResultType]> {
  let summary = "GELU, tanh approximation (as GPT-2)";
  let arguments = (ins TP_FloatTensor:$input);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def TP_AttentionOp : TP_Op<"attention", [DeclareOpInterfaceMethods<TP_MegatronRegionOpInterface, ["getColumnSections", "verifyTensorParallelSize"]>, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface, ["partition"]>]> {
  let summary = "Causal multi-head self-attention on a fused [q|k|v] tensor";
  let description = [{
    `qkv` is `[B, T, 3C]`: q, k and v sections of width C each, every section
    holding `num_heads` heads of width `C / num_heads`. The result is
    `[B, T, C]` with the heads concatenated. After tp-partition each rank
    holds whole heads of all three sections, so the local op is the same op
    with `num_heads / TP` heads.
  }];
  let arguments = (ins TP_FloatTensor:$qkv, ConfinedAttr<I64Attr, [IntPositive]>:$num_heads);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $qkv `heads` `=` $num_heads attr-dict `:` type($qkv) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TP_SoftmaxOp : TP_Op<"softmax", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, DeclareOpInterfaceMethods<TP_VJPOpInterface>, SameOperandsAndResultType]> {
  let summary = "Softmax along one dimension";
  let arguments = (ins TP_FloatTensor:$input, I64Attr:$dim);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input `dim` `=` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def TP_CrossEntropyOp : TP_Op<"cross_entropy", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface, ["partition"]>]> {
  let summary = "Mean softmax cross-entropy over tokens";
  let description = [{
    `logits` is `[..., Vp]`, `targets` the matching `[...]` class ids. Only
    the first `valid_vocab` entries of the last dimension are real classes;
    the rest is padding (Megatron pads the vocabulary to a multiple of
    128 * TP) and never enters the softmax. The loss may be wider than the
    logits (the fp32 loss of bf16 logits).
  }];
  let arguments = (ins TP_FloatTensor:$logits, TP_IndexTensor:$targets,
                       ConfinedAttr<I64Attr, [IntPositive]>:$valid_vocab);
  let results = (outs TP_Scalar:$loss);
  let assemblyFormat = [{
    $logits `,` $targets `valid_vocab` `=` $valid_vocab attr-dict `:`
    type($logits) `,` type($targets) `->` type($loss)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradient ops (built by tp-autodiff; local shapes)
//===----------------------------------------------------------------------===//

def TP_WeightGradOp : TP_Op<"weight_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure]> {
  let summary = "Sum over the leading dimensions of outer products: a^T b";
  let description = [{
    `lhs` is `[..., K]`, `rhs` `[..., N]` with the same leading dimensions;
    the result `[K, N]` is the gradient of a `[K, N]` weight shared by every
    row.
  }];
  let arguments = (ins TP_FloatTensor:$lhs, TP_FloatTensor:$rhs);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TP_SumToOp : TP_Op<"sum_to", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure]> {
  let summary = "Sums away the leading dimensions (the gradient of a broadcast)";
  let arguments = (ins TP_FloatTensor:$input);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def TP_GeluGradOp : TP_Op<"gelu_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of tp.gelu at `input` times `grad`";
  let arguments = (ins TP_FloatTensor:$input, TP_FloatTensor:$grad);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def TP_SoftmaxGradOp : TP_Op<"softmax_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of tp.softmax from its output: y * (dy - sum(dy * y))";
  let arguments = (ins TP_FloatTensor:$output, TP_FloatTensor:$grad,
                       I64Attr:$dim);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad `dim` `=` $dim attr-dict `:` type($result)";
}

def TP_LayerNormGradOp : TP_Op<"layer_norm_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure,
    AllTypesMatch<["input", "grad", "input_grad"]>,
    AllShapesMatch<["weight", "weight_grad", "bias_grad"]>,
    AllTypesMatch<["weight_grad", "bias_grad"]>]> {
  let summary = "Gradients of tp.layer_norm; its statistics are recomputed";
  let description = [{
    The parameter gradients may be wider than the weight: fp32 gradients of
    the bf16 copy of an fp32 master weight (tp-mixed-precision).
  }];
  let arguments = (ins TP_FloatTensor:$input, TP_FloatTensor:$weight,
                       TP_FloatTensor:$grad, F32Attr:$epsilon);
  let results = (outs TP_FloatTensor:$input_grad, TP_FloatTensor:$weight_grad,
                      TP_FloatTensor:$bias_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $input `,` $weight `,` $grad attr-dict `:` type($input) `,` type($weight)
    `->` type($weight_grad)
  }];
}

def TP_AttentionGradOp : TP_Op<"attention_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure,
    AllTypesMatch<["qkv", "qkv_grad"]>]> {
  let summary = "Gradient of tp.attention; probabilities are recomputed";
  let arguments = (ins TP_FloatTensor:$qkv, TP_FloatTensor:$grad,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads);
  let results = (outs TP_FloatTensor:$qkv_grad);
  let assemblyFormat = [{
    $qkv `,` $grad `heads` `=` $num_heads attr-dict `:` type($qkv) `,`
    type($grad)
  }];
}

def TP_EmbeddingGradOp : TP_Op<"embedding_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure]> {
  let summary = "Gradient of tp.embedding's table: rows summed by id";
  let description = [{
    Rows for ids outside [offset, offset + V) belong to another rank's
    vocabulary slice and are skipped.
  }];
  let arguments = (ins TP_FloatTensor:$grad, TP_IndexTensor:$ids,
                       Optional<Index>:$offset);
  let results = (outs TP_FloatTensor:$table_grad);
  let assemblyFormat = [{
    $grad `[` $ids `]` (`offset` $offset^)? attr-dict `:` type($grad) `,`
    type($ids) `->` type($table_grad)
  }];
}

def TP_PositionEmbeddingGradOp : TP_Op<"position_embedding_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure]> {
  let summary = "Gradient of tp.position_embedding: the rows used, zeros after";
  let arguments = (ins TP_FloatTensor:$grad);
  let results = (outs TP_FloatTensor:$table_grad);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($table_grad)";
}

def TP_XentGradOp : TP_Op<"xent_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure,
    AllTypesMatch<["logits", "logits_grad"]>, AllTypesMatch<["max", "sum_exp"]>]> {
  let summary = "Gradient of the mean cross-entropy for this rank's logits";
  let description = [{
    (softmax - onehot(target)) * loss_grad / tokens over this rank's real
    vocabulary columns, from the all-reduced max and sum of exponentials:
    no communication.
  }];
  let arguments = (ins TP_FloatTensor:$logits, TP_FloatTensor:$max,
                       TP_FloatTensor:$sum_exp, TP_IndexTensor:$targets,
                       TP_Scalar:$loss_grad, Index:$offset,
                       ConfinedAttr<I64Attr, [IntPositive]>:$valid_vocab);
  let results = (outs TP_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    $logits `,` $max `,` $sum_exp `,` $targets `,` $loss_grad `offset` $offset
    `valid_vocab` `=` $valid_vocab attr-dict `:` type($logits) `,`
    type($max) `,` type($targets) `,` type($loss_grad)
  }];
}

//===----------------------------------------------------------------------===//
// Optimizer ops (built by tp-optimizer)
//===----------------------------------------------------------------------===//

def TP_SumSquaresOp : TP_Op<"sum_squares", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure]> {
  let summary = "Sum of the squares of every element of its inputs (for the global norm)";
  let description = [{
    Accumulated in double and rounded once. One op sums a group of
    gradients (tp-optimizer makes one for the sharded and one for the
    replicated), so the runtime reads one number back for the group, not
    one per gradient: on a GPU each read is a synchronisation.
  }];
  let arguments = (ins Variadic<TP_FloatTensor>:$inputs);
  let results = (outs F32:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def TP_AdamWOp : TP_Op<"adamw", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq", "new_param",
                   "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "One AdamW update with PyTorch's semantics";
  let description = [{
    With g = grad * grad_scale (the clipping factor) and t = step:
      param *= 1 - lr * weight_decay          (only with `decay`)
      exp_avg += (1 - beta1) * (g - exp_avg)
      exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
      param -= lr / (1 - beta1^t) * exp_avg
               / (sqrt(exp_avg_sq) / sqrt(1 - beta2^t) + eps)
    in torch.optim.AdamW's order. `hyperparameters` is
    [lr, beta1, beta2, eps, weight_decay, grad_clip, step, 0].
  }];
  let arguments = (ins TP_FloatTensor:$param, TP_FloatTensor:$grad,
                       TP_FloatTensor:$exp_avg, TP_FloatTensor:$exp_avg_sq,
                       StaticShapeTensorOf<[F32]>:$hyperparameters,
                       F32:$grad_scale, UnitAttr:$decay);
  let results = (outs TP_FloatTensor:$new_param, TP_FloatTensor:$new_exp_avg,
                      TP_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $hyperparameters `,`
    $grad_scale attr-dict `:` type($param) `,` type($hyperparameters)
  }];
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel cross-entropy, in the pieces between its all-reduces
//===----------------------------------------------------------------------===//

def TP_XentMaxOp : TP_Op<"xent_max", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure]> {
  let summary = "Per-token maximum over this rank's real vocabulary columns";
  let description = [{
    `logits` holds the global vocabulary columns [offset, offset + Vl); only
    columns below `valid_vocab` are real. A rank without real columns gives
    -inf. An all-reduce (max) over the vocabulary axis follows.
  }];
  let arguments = (ins TP_FloatTensor:$logits, Index:$offset,
                       ConfinedAttr<I64Attr, [IntPositive]>:$valid_vocab);
  let results = (outs TP_FloatTensor:$max);
  let assemblyFormat = [{
    $logits `offset` $offset `valid_vocab` `=` $valid_vocab attr-dict `:`
    type($logits) `->` type($max)
  }];
  let hasVerifier = 1;
}

def TP_XentSumExpOp : TP_Op<"xent_sum_exp", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure,
    AllTypesMatch<["max", "sum_exp", "target_logit"]>]> {
  let summary = "Per-token sum of exp(logit - max) and the target's logit, on this rank";
  let description = [{
    Both results are this rank's share: the target logit is 0 where the
    target is another rank's column. All-reduces (sum) over the vocabulary
    axis complete them.
  }];
  let arguments = (ins TP_FloatTensor:$logits, TP_FloatTensor:$max,
                       TP_IndexTensor:$targets, Index:$offset,
                       ConfinedAttr<I64Attr, [IntPositive]>:$valid_vocab);
  let results = (outs TP_FloatTensor:$sum_exp, TP_FloatTensor:$target_logit);
  let assemblyFormat = [{
    $logits `,` $max `,` $targets `offset` $offset `valid_vocab` `=`
    $valid_vocab attr-dict `:` type($logits) `,` type($targets) `->`
    type($max)
  }];
  let hasVerifier = 1;
}

def TP_XentLossOp : TP_Op<"xent_loss", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, AllTypesMatch<["sum_exp", "max", "target_logit"]>]> {
  let summary = "Mean over tokens of log(sum_exp) + max - target_logit";
  let arguments = (ins TP_FloatTensor:$sum_exp, TP_FloatTensor:$max,
                       TP_FloatTensor:$target_logit);
  let results = (outs TP_Scalar:$loss);
  let assemblyFormat = [{
    $sum_exp `,` $max `,` $target_logit attr-dict `:` type($sum_exp) `->`
    type($loss)
  }];
}

//===----------------------------------------------------------------------===//
// Precision
//===----------------------------------------------------------------------===//

def TP_ConvertOp : TP_Op<"convert", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, AllShapesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>]> {
  let summary = "Rounds (or widens) every element to another float type";
  let description = [{
    Built by tp-mixed-precision: the bf16 copy of an fp32 master weight, made
    once per step, and the way back to fp32 where a bf16 value meets an fp32
    consumer. Narrowing rounds to nearest, ties to even.
  }];
  let arguments = (ins TP_FloatTensor:$input);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Sharding changes and mesh queries
//===----------------------------------------------------------------------===//

def TP_ReshardOp : TP_Op<"reshard", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface, ["partition"]>]> {
  let summary = "Gives a value the sharding in its tp.sharding attribute";
  let description = [{
    At global shapes an identity. A user writes it to constrain the sharding
    of a value; sharding propagation inserts it where a value's sharding
    differs from what its consumer needs. tp-partition turns it into the
    collectives or local slices that move the data.
  }];
  let arguments = (ins TP_FloatTensor:$input);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def TP_AxisIndexOp : TP_Op<"axis_index", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "This rank's index along a mesh axis (a runtime value)";
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrAttr:$axis);
  let results = (outs Index:$result);
  let assemblyFormat = "$mesh `[` $axis `]` attr-dict";
}

//===----------------------------------------------------------------------===//
// Collectives over one mesh axis
//===----------------------------------------------------------------------===//

/// A collective of kind `kind` (a CollectiveKind case) covering the tensor
/// `tensor` (its accessor: the input of a reduce-scatter, the result
/// otherwise), with its VJP.
class TP_CollectiveOp<string mnemonic, string kind, string tensor,
                      list<Trait> traits = []>
    : TP_Op<mnemonic, !listconcat(traits,
        [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
         TP_CollectiveOpInterface,
         DeclareOpInterfaceMethods<TP_PrecisionOpInterface>,
         DeclareOpInterfaceMethods<TP_VJPOpInterface>])> {
  /// More of the op's class declaration (a reducing op's reduction).
  code extraCollectiveDeclaration = "";
  let extraClassDeclaration = [{
    ::mlir::tp::CollectiveKind getCollectiveKind() {
      return ::mlir::tp::CollectiveKind::}] # kind # [{;
    }
    ::mlir::Value getCollectiveTensor() { return }] # tensor # [{(); }
  }] # extraCollectiveDeclaration;
}

def TP_FOp : TP_CollectiveOp<"f", "identity", "getResult", [Pure, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, SameOperandsAndResultType]> {
  let summary = "Megatron's f: identity forward, all-reduce of the gradient backward";
  let arguments = (ins TP_FloatTensor:$input, FlatSymbolRefAttr:$mesh, StrAttr:$axis);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input `over` $mesh `[` $axis `]` attr-dict `:` type($result)";
}

def TP_GOp : TP_CollectiveOp<"g", "all_reduce", "getResult", [DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, SameOperandsAndResultType]> {
  let summary = "Megatron's g: all-reduce forward, identity backward";
  let arguments = (ins TP_FloatTensor:$input, FlatSymbolRefAttr:$mesh, StrAttr:$axis);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input `over` $mesh `[` $axis `]` attr-dict `:` type($result)";
}

def TP_AllReduceOp : TP_CollectiveOp<"all_reduce", "all_reduce", "getResult", [SameOperandsAndResultType]> {
  let summary = "Reduces a tensor across the ranks of a mesh axis";
  let arguments = (ins AnyStaticShapeTensor:$input, TP_ReductionKind:$kind,
                       FlatSymbolRefAttr:$mesh, StrAttr:$axis);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $kind $input `over` $mesh `[` $axis `]` attr-dict `:` type($result)
  }];
  let extraCollectiveDeclaration = [{
    ::mlir::tp::ReductionKind getCollectiveReduction() { return getKind(); }
  }];
}

def TP_AllGatherOp : TP_CollectiveOp<"all_gather", "all_gather", "getResult"> {
  let summary = "Concatenates the ranks' tensors along one dimension";
  let arguments = (ins AnyStaticShapeTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis, I64Attr:$dim);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `dim` `=` $dim attr-dict `:`
    type($input) `->` type($result)
  }];
}

def TP_ReduceScatterOp : TP_CollectiveOp<"reduce_scatter", "reduce_scatter", "getInput"> {
  let summary = "Sums across ranks, each rank keeping its chunk of one dimension";
  let arguments = (ins AnyStaticShapeTensor:$input, TP_ReductionKind:$kind,
                       FlatSymbolRefAttr:$mesh, StrAttr:$axis, I64Attr:$dim);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $kind $input `over` $mesh `[` $axis `]` `dim` `=` $dim attr-dict `:`
    type($input) `->` type($result)
  }];
  let extraCollectiveDeclaration = [{
    ::mlir::tp::ReductionKind getCollectiveReduction() { return getKind(); }
  }];
}

def TP_LocalSliceOp : TP_CollectiveOp<"local_slice", "local_slice", "getResult", [Pure]> {
  let summary = "This rank's chunk of a replicated tensor along one dimension";
  let description = [{
    No communication: the rank index along the axis is a runtime value, so
    one program serves every rank.
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis, I64Attr:$dim);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `dim` `=` $dim attr-dict `:`
    type($input) `->` type($result)
  }];
}

#endif // MEGATRON_DIALECT_TP_IR_TPOPS_TD
