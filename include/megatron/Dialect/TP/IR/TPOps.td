//===- TPOps.td - tp dialect operations --------------------*- tablegen -*-===//
#ifndef MEGATRON_DIALECT_TP_IR_TPOPS_TD
#define MEGATRON_DIALECT_TP_IR_TPOPS_TD

include "megatron/Dialect/TP/IR/TPBase.td"
include "megatron/Dialect/TP/IR/TPAttrs.td"
include "megatron/Dialect/TP/IR/TPTypes.td"
include "mlir/IR/OpBase.td"
include "megatron/Dialect/TP/Interfaces/TPInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// An op naming a mesh axis whose only symbol check is that the mesh and the
// axis exist (MeshAxisUser in TP.h).
def TP_MeshAxisUserTrait : NativeOpTrait<"MeshAxisUser"> {
  let cppNamespace = "::mlir::tp";
}
def TP_MeshAxisUser : TraitList<[SymbolUserOpInterface, TP_MeshAxisUserTrait]>;

// An op that `--recompute=selective` recomputes in the backward pass rather
// than keep its result alive for it (tp-recompute-layers): elementwise and
// normalisation work, a few FLOPs a byte, and f, whose forward is the
// identity, next to the GEMMs, attention and collectives whose results it
// keeps (SelectiveRecompute in TP.h).
def TP_SelectiveRecompute : NativeOpTrait<"SelectiveRecompute"> {
  let cppNamespace = "::mlir::tp";
}

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def TP_MeshOp : TP_Op<"mesh", [Symbol]> {
  let summary = "A named device mesh with named axes";
  let description = [{
    Declares a logical device mesh: an ordered list of named axes, each with
    its number of ranks. Shardings (`#tp.sharding`) and collectives refer to a
    mesh by symbol and to one of its axes by name. Axis names must be unique
    and non-empty, sizes positive. tp-megatron-annotate creates
    `tp.mesh @mesh axes = ["tp" = N]`; an axis of size 1 splits nothing.

    An axis may be factored into named sub-axes, major to minor, whose sizes
    multiply to its own (Shardy's sub-axes, named): with `"tp" = 4 ["tp_kv"
    = 2, "tp_rep" = 2]`, tp rank t is at `t / 2` on "tp_kv" and `t % 2` on
    "tp_rep". A dimension split over all of an axis's sub-axes in order is
    split over the axis. Grouped-query attention with more ranks than
    key/value heads splits the key/value heads over the major sub-axis and
    gives the ranks of the minor one, which share a key/value head, each
    its own query heads.

    Example:

    ```mlir
    tp.mesh @m axes = ["dp" = 1, "tp" = 4]
    tp.mesh @g axes = ["tp" = 4 ["tp_kv" = 2, "tp_rep" = 2]]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$axis_sizes,
                       OptionalAttr<StrArrayAttr>:$sub_axis_names,
                       OptionalAttr<DenseI64ArrayAttr>:$sub_axis_sizes,
                       OptionalAttr<StrArrayAttr>:$sub_axis_parents);
  let assemblyFormat = [{
    $sym_name `axes` `=` custom<MeshAxes>($axis_names, $axis_sizes,
        $sub_axis_names, $sub_axis_sizes, $sub_axis_parents) attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Size of `axis` (an axis or a sub-axis), or nullopt when the mesh has
    /// no such axis.
    std::optional<int64_t> getAxisSize(::llvm::StringRef axis);
    /// Where a sub-axis lies in its axis: the parent, the number of parent
    /// ranks between neighbours on it (the product of the more minor
    /// sub-axes' sizes) and its size. nullopt for a name that is not a
    /// sub-axis.
    struct SubAxis {
      ::llvm::StringRef parent;
      int64_t stride, size;
    };
    std::optional<SubAxis> getSubAxis(::llvm::StringRef axis);
    /// The sub-axes of `axis`, major to minor; empty when it has none.
    ::llvm::SmallVector<::llvm::StringRef> getSubAxes(::llvm::StringRef axis);
    /// `axes` with every factored axis replaced by its sub-axes.
    ::llvm::SmallVector<::llvm::StringRef>
    expandAxes(::llvm::ArrayRef<::llvm::StringRef> axes);
    /// `axes` with every complete run of an axis's sub-axes, in order,
    /// replaced by the axis: the one spelling of each split.
    ::llvm::SmallVector<::llvm::StringRef>
    canonicalAxes(::llvm::ArrayRef<::llvm::StringRef> axes);
    /// Factors `axis` into `names` of `sizes`, major to minor.
    void setSubAxes(::llvm::StringRef axis,
                    ::llvm::ArrayRef<::llvm::StringRef> names,
                    ::llvm::ArrayRef<int64_t> sizes);
  }];
}

//===----------------------------------------------------------------------===//
// Transformer ops (global shapes until tp-partition makes them local)
//===----------------------------------------------------------------------===//

def TP_EmbeddingOp : TP_Op<"embedding", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface, ["partition"]>]> {
  let summary = "Token embedding: rows of a [V, C] table gathered by id";
  let description = [{
    Gathers the rows of `table` ([V, C]) selected by the i32 token ids `ids`
    (of any shape [...]); the result is [..., C] with the table's element type.

    With `offset`, the table holds the rows [offset, offset + V) of a
    vocabulary split across ranks: ids outside that range give zero rows,
    and the sum over ranks (a `tp.g`) completes the embedding: a table split
    by vocabulary rows makes the result a partial sum. tp-partition sets
    `offset` to the rank's first row, computed from `tp.axis_index`.
    The gradient is `tp.embedding_grad`.

    Example:

    ```mlir
    %x = tp.embedding %wte[%ids] : tensor<512x64xf32>, tensor<2x32xi32> -> tensor<2x32x64xf32>
    // One rank's half of the vocabulary, rows [%start, %start + 256):
    %p = tp.embedding %wte_local[%ids] offset %start : tensor<256x64xf32>, tensor<2x32xi32> -> tensor<2x32x64xf32>
    ```
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
  let description = [{
    `table` is [N, C]; the result [T, C], T <= N, is its first T rows: the
    embeddings of positions 0 to T - 1 of a sequence of length T. A
    `tp.bias_add` adds them to the [B, T, C] token embeddings. Under sharding
    the positions stay whole and only the width may be split. The gradient is
    `tp.position_embedding_grad`.

    Example:

    ```mlir
    %pos = tp.position_embedding %wpe : tensor<1024x64xf32> -> tensor<32x64xf32>
    %x = tp.bias_add %tok, %pos : tensor<2x32x64xf32>, tensor<32x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$table);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$table attr-dict `:` type($table) `->` type($result)";
  let hasVerifier = 1;
}

def TP_LayerNormOp : TP_Op<"layer_norm", [TP_SelectiveRecompute, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>,
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["weight", "bias"]>]> {
  let summary = "Layer normalisation over the last dimension";
  let description = [{
    torch.nn.LayerNorm over the last dimension C of `input`:
    `(x - mean) / sqrt(var + epsilon) * weight + bias` with the biased
    variance, per row. `weight` and `bias` are [C] and share the input's
    element type; `epsilon` defaults to 1e-5. The result has the input's type.

    Under sharding the leading dimensions may be split, but the normalised
    dimension stays whole and the parameters are replicated: in Megatron's
    plan every rank normalises the whole activation. The gradient is
    `tp.layer_norm_grad`.

    Example:

    ```mlir
    %h = tp.layer_norm %x, %w, %b : tensor<2x32x64xf32>, tensor<64xf32>
    %h2 = tp.layer_norm %x, %w, %b {epsilon = 1.0e-06 : f32} : tensor<2x32x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, TP_FloatTensor:$weight,
                       TP_FloatTensor:$bias,
                       DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def TP_ResidualLayerNormOp : TP_Op<"residual_layer_norm", [TP_SelectiveRecompute, Pure,
    AllTypesMatch<["residual", "delta", "sum", "result"]>,
    AllTypesMatch<["bias", "weight", "norm_bias"]>]> {
  let summary = "A residual connection and the layer norm of its sum";
  let description = [{
    `sum = residual + delta + bias` (the branch's [C] bias added to every
    row) and `result = layer_norm(sum, weight, norm_bias)` over the last
    dimension C, as `tp.layer_norm` computes it. The residual stream carries
    the sum on; the next block reads the norm. One pass over memory writes
    both, where separate ops would write the sum and read it back.

    Made by tp-fuse-residual-norm from a `tp.add` of a `tp.bias_add` and
    the `tp.layer_norm` reading it, on the per-rank program before the
    lowering (it has no gradient or sharding rule: it is never planned or
    differentiated). Made before tp-outline-layers, it keeps the norm that
    opens a layer with the residual add that closes the last one.

    Example:

    ```mlir
    %sum, %h = tp.residual_layer_norm %x, %delta, %b, %w, %nb : tensor<2x32x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$residual, TP_FloatTensor:$delta,
                       TP_FloatTensor:$bias, TP_FloatTensor:$weight,
                       TP_FloatTensor:$norm_bias,
                       DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs TP_FloatTensor:$sum, TP_FloatTensor:$result);
  let assemblyFormat = [{
    $residual `,` $delta `,` $bias `,` $weight `,` $norm_bias attr-dict `:`
    type($residual) `,` type($bias)
  }];
  let hasVerifier = 1;
}

def TP_RMSNormOp : TP_Op<"rms_norm", [TP_SelectiveRecompute, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "RMS normalisation over the last dimension";
  let description = [{
    Llama's RMSNorm over the last dimension C of `input`:
    `x / sqrt(mean(x^2) + epsilon) * weight` per row, with no mean
    subtracted and no bias. `weight` is [C] and shares the input's element
    type; `epsilon` defaults to 1e-5. The result has the input's type.

    It splits as `tp.layer_norm` does: the leading dimensions may be split,
    the normalised one stays whole and the weight is replicated. The
    gradient is `tp.rms_norm_grad`.

    Example:

    ```mlir
    %h = tp.rms_norm %x, %w : tensor<2x32x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, TP_FloatTensor:$weight,
                       DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def TP_ResidualRMSNormOp : TP_Op<"residual_rms_norm", [TP_SelectiveRecompute, Pure,
    AllTypesMatch<["residual", "delta", "sum", "result"]>]> {
  let summary = "A residual connection and the RMS norm of its sum";
  let description = [{
    `sum = residual + delta` and `result = rms_norm(sum, weight)` over the
    last dimension C, as `tp.rms_norm` computes it: the form of
    `tp.residual_layer_norm` for models without biases. One pass over
    memory writes both.

    Made by tp-fuse-residual-norm from a `tp.add` and the `tp.rms_norm`
    reading it, on the per-rank program before the lowering (it has no
    gradient or sharding rule).

    Example:

    ```mlir
    %sum, %h = tp.residual_rms_norm %x, %delta, %w : tensor<2x32x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$residual, TP_FloatTensor:$delta,
                       TP_FloatTensor:$weight,
                       DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs TP_FloatTensor:$sum, TP_FloatTensor:$result);
  let assemblyFormat = [{
    $residual `,` $delta `,` $weight attr-dict `:` type($residual) `,`
    type($weight)
  }];
  let hasVerifier = 1;
}

def TP_MatmulOp : TP_Op<"matmul", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>]> {
  let summary = "Batched matrix product with optional transposes";
  let description = [{
    `lhs` is `[batch..., M, K]` (`[batch..., K, M]` with `transpose_lhs`),
    `rhs` is `[K, N]` shared by every batch, or `[batch..., K, N]`
    (last two dims swapped with `transpose_rhs`); the result is
    `[batch..., M, N]`. Operands and result have one element type.

    Under sharding a split of M, N or a batch dimension carries over to the
    result, while a split of the contracted K leaves each rank a partial sum.
    Megatron's column-parallel GEMMs (QKV, MLP up) split the weight's N; its
    row-parallel GEMMs (attention output, MLP down) split K, and a `tp.g`
    completes the sum. The tied LM head is a `transpose_rhs` product with the
    [V, C] token embedding table.

    tp-autodiff has a gradient rule for a `[K, N]` weight (`[N, K]` with
    `transpose_rhs`) and no `transpose_lhs`: the input's gradient is a
    `tp.matmul`, the weight's a `tp.weight_grad`.

    Example:

    ```mlir
    %qkv = tp.matmul %h, %w : tensor<2x32x64xf32>, tensor<64x192xf32> -> tensor<2x32x192xf32>
    %logits = tp.matmul %h, %wte {transpose_rhs} : tensor<2x32x64xf32>, tensor<512x64xf32> -> tensor<2x32x512xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$lhs, TP_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TP_AddOp : TP_Op<"add", [TP_SelectiveRecompute, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, SameOperandsAndResultType]> {
  let summary = "Elementwise sum (the residual connection)";
  let description = [{
    `lhs + rhs` elementwise; operands and result have one type. In a
    transformer it is the residual connection; tp-autodiff also uses it to
    sum the gradient contributions of a value used more than once. Any
    dimension may be split, the same way on both operands and the result.

    Example:

    ```mlir
    %r = tp.add %x, %attn : tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$lhs, TP_FloatTensor:$rhs);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def TP_BiasAddOp : TP_Op<"bias_add", [TP_SelectiveRecompute, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, AllTypesMatch<["input", "result"]>]> {
  let summary = "Adds a bias broadcast over the leading dimensions";
  let description = [{
    The bias's shape is a suffix of the input's: a `[C]` bias on `[B, T, C]`,
    or the `[T, C]` position embedding on `[B, T, C]`. Both have one element
    type, and the result has the input's type.

    The bias is split like the dimensions of the input it covers: the bias of
    a column-parallel GEMM is split with its columns, while the bias of a
    row-parallel GEMM is replicated and added once, after the `tp.g`. The
    bias's gradient is a `tp.sum_to` of the result's gradient.

    Example:

    ```mlir
    %y = tp.bias_add %h, %b : tensor<2x32x256xf32>, tensor<256xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, TP_FloatTensor:$bias);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input `,` $bias attr-dict `:` type($input) `,` type($bias)";
  let hasVerifier = 1;
}

def TP_GeluOp : TP_Op<"gelu", [TP_SelectiveRecompute, TP_MegatronRegionOpInterface, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, SameOperandsAndResultType]> {
  let summary = "GELU, tanh approximation (as GPT-2)";
  let description = [{
    `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))` elementwise, the tanh
    approximation GPT-2 uses; the result has the input's type. Being
    elementwise, it runs on the column-split activation between the two GEMMs
    of Megatron's MLP with no communication. The gradient is `tp.gelu_grad`.

    Example:

    ```mlir
    %a = tp.gelu %h : tensor<2x32x256xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

/// The arguments of a DropoutOpInterface op: the rate and stream, the key,
/// and where the rank's elements sit in the global tensor (tp-partition
/// sets them). Attention's are optional, the [batch, heads] of its
/// probabilities. The stream is a value, not an attribute, so that the
/// layers of a model, which differ only in their streams, stay one body
/// (tp-outline-layers) and one loop (tp-roll-layers).
class TP_DropoutArgs {
  dag args = (ins OptionalAttr<TP_DropoutRate>:$dropout,
                  Optional<Index>:$stream,
                  Optional<TP_Hyperparameters>:$key,
                  Variadic<Index>:$offsets,
                  OptionalAttr<DenseI64ArrayAttr>:$global_shape);
  string format = [{
    (`dropout` `=` $dropout^ `stream` `=` $stream)?
    (`at` ` ` `[` $offsets^ `]` `of` $global_shape)?
    (`key` `(` $key^ `:` type($key) `)`)?
  }];
}
def TP_ProbabilityDropoutArgs : TP_DropoutArgs;
/// tp.dropout's: the rate is not optional.
def TP_TensorDropoutArgs : TP_DropoutArgs {
  let args = (ins TP_DropoutRate:$dropout, Index:$stream,
                  Optional<TP_Hyperparameters>:$key,
                  Variadic<Index>:$offsets,
                  OptionalAttr<DenseI64ArrayAttr>:$global_shape);
  let format = [{
    `dropout` `=` $dropout `stream` `=` $stream
    (`at` ` ` `[` $offsets^ `]` `of` $global_shape)?
    (`key` `(` $key^ `:` type($key) `)`)?
  }];
}

def TP_DropoutOp : TP_Op<"dropout", [TP_SelectiveRecompute, AttrSizedOperandSegments, DeclareOpInterfaceMethods<TP_DropoutOpInterface>, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface, ["partition"]>, AllTypesMatch<["input", "result"]>]> {
  let summary = "Drops elements at random while training, the same at any layout";
  let description = [{
    Each element of `input` (of rank 1 to 3) is kept with probability
    1 - `dropout` and then scaled by 1 / (1 - `dropout`), or set to zero
    (DropoutOpInterface). Its mask bit is drawn from the training step's
    seed and step (`key`), the site's `stream` and the element's index in
    the global tensor: `input` is the part of `global_shape` starting at
    `offsets`, which tp-partition sets (absent: the whole tensor), so every
    tensor-parallel size, sequence split, data-parallel size and
    micro-batch count draws the same mask. Without a key (the forward entry,
    evaluation) the op is the identity. Its gradient is the same dropout of
    the result's gradient, the mask recomputed rather than stored.

    Example:

    ```mlir
    %stream = arith.constant 17 : index
    %d = tp.dropout %x dropout = 1.000000e-01 stream = %stream : tensor<2x32x64xf32>
    ```
  }];
  let arguments = !con((ins TP_FloatTensor:$input), TP_TensorDropoutArgs.args);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = !strconcat("$input ", TP_TensorDropoutArgs.format,
                                  " attr-dict `:` type($result)");
  let hasVerifier = 1;
  let hasFolder = 1;
}

def TP_SwiGLUOp : TP_Op<"swiglu", [TP_SelectiveRecompute, TP_MegatronRegionOpInterface, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, SameOperandsAndResultType]> {
  let summary = "SwiGLU: silu(gate) * up (Llama's MLP)";
  let description = [{
    `silu(gate) * up` elementwise, with `silu(x) = x / (1 + exp(-x))`:
    the gated unit between Llama's gate and up projections and its down
    projection. Operands and result have one type. Like `tp.gelu` it is a
    Megatron region op: tp-megatron-annotate splits the GEMMs producing
    `gate` and `up` by columns and the GEMM consuming the result by rows,
    so each rank gates its own columns with no communication. The gradient
    is `tp.swiglu_grad`.

    Example:

    ```mlir
    %a = tp.swiglu %gate, %up : tensor<2x32x256xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$gate, TP_FloatTensor:$up);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def TP_RoPEOp : TP_Op<"rope", [TP_SelectiveRecompute, DeclareOpInterfaceMethods<TP_MegatronRegionOpInterface, ["getColumnHeads", "verifyTensorParallelSize"]>, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface, ["partition"]>, AllTypesMatch<["input", "result"]>]> {
  let summary = "Rotary position embedding of each head (Hugging Face's rotate_half)";
  let description = [{
    `input` is `[B, T, H D]`: `num_heads` heads of even width D per token.
    Token t of sequence b sits at position `p = positions[b] + t` (`p = t`
    without `positions`). Within each head, element i < D/2 and element
    i + D/2 form a pair rotated by the angle `p * theta^(-2i/D)`:
    `(x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)`, which is Hugging
    Face's `x * cos + rotate_half(x) * sin` (Llama, Mistral, Qwen). Angles
    are computed in double precision. With `inverse` the rotation is by the
    negated angle: the gradient of the rotation, so the op is its own VJP.

    Applied to q and to k before attention, inside the head-parallel region:
    the GEMM producing `input` is split by columns (tp-megatron-annotate),
    each rank rotating its own whole heads; the sequence stays whole.

    Example:

    ```mlir
    %q = tp.rope %x heads = 4 theta = 1.0e+04 : tensor<2x32x64xf32>
    %k = tp.rope %x, %pos heads = 4 theta = 5.0e+05 : tensor<2x1x64xf32>, tensor<2xi32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input,
                   Optional<TP_IndexTensor>:$positions,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                   F64Attr:$theta, UnitAttr:$inverse);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`,` $positions^)? `heads` `=` $num_heads `theta` `=` $theta
    attr-dict `:` type($input) (`,` type($positions)^)?
  }];
  let hasVerifier = 1;
}

def TP_AttentionOp : TP_Op<"attention", [AttrSizedOperandSegments, DeclareOpInterfaceMethods<TP_DropoutOpInterface>, DeclareOpInterfaceMethods<TP_MegatronRegionOpInterface, ["getColumnSections", "getColumnHeads", "verifyTensorParallelSize"]>, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_VJPOpInterface>, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface, ["partition"]>]> {
  let summary = "Causal self-attention: multi-head or grouped-query";
  let description = [{
    Two forms. Fused (GPT-2): one `qkv` `[B, T, 3C]` of q, k and v sections
    of width C each, every section holding `num_heads` heads of width
    `D = C / num_heads`. Separate (Llama): `q` `[B, T, H D]` with
    `num_heads` = H heads, and `k` and `v` `[B, T, KV D]` with `kv_heads` =
    KV heads (grouped-query attention: KV divides H, and query head h reads
    key/value head `h / (H / KV)`; KV = H is multi-head attention, 1
    multi-query). `kv_heads` defaults to `num_heads` and belongs to the
    separate form. Each head computes `softmax(q k^T / sqrt(D)) v` under a
    causal mask (query t attends to keys 0 to t). The result is `[B, T, H
    D]` with the heads concatenated.

    The sequence dimension stays whole; the batch may be split. After
    tp-partition each rank holds whole heads of q, k and v (the fused
    form's sections split one by one), so the local op is the same op with
    `num_heads / TP` and `kv_heads / TP` heads; tp-megatron-annotate
    rejects a TP size that does not divide them. The gradient is
    `tp.attention_grad`.

    With `dropout` (a rate in [0, 1)) and its `stream`, training drops
    probabilities after the softmax (DropoutOpInterface): probability (t, j)
    of head h of sequence b is element (b, h, t, j) of the global [B, H, T,
    T] probabilities, the rank's first sequence and head at `offsets` of
    `global_shape` [B, H]. Without a `key` (evaluation) it drops nothing.

    Example:

    ```mlir
    %a = tp.attention %qkv heads = 4 : tensor<2x32x192xf32> -> tensor<2x32x64xf32>
    %g = tp.attention %q, %k, %v heads = 8 kv_heads = 2 : tensor<2x32x64xf32>, tensor<2x32x16xf32>, tensor<2x32x16xf32> -> tensor<2x32x64xf32>
    %d = tp.attention %qkv heads = 4 dropout = 1.000000e-01 stream = %stream : tensor<2x32x192xf32> -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = !con(
      (ins Variadic<TP_FloatTensor>:$inputs,
           ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
           OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$kv_heads),
      TP_ProbabilityDropoutArgs.args);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $inputs `heads` `=` $num_heads (`kv_heads` `=` $kv_heads^)?
    }] # !strconcat(TP_ProbabilityDropoutArgs.format, [{ attr-dict
    `:` type($inputs) `->` type($result)
  }]);
  let extraClassDeclaration = [{
    /// The key/value heads: kv_heads, or num_heads when absent.
    int64_t getKeyValueHeads() {
      return getKvHeads().value_or(getNumHeads());
    }
  }];
  let hasVerifier = 1;
}

def TP_KVCacheStoreOp : TP_Op<"kv_cache_store", [DeclareOpInterfaceMethods<TP_MegatronRegionOpInterface, ["getColumnSections", "getColumnHeads", "verifyTensorParallelSize"]>, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface, ["partition"]>, AllTypesMatch<["cache", "result"]>]> {
  let summary = "Writes a chunk's keys or values into a KV cache";
  let description = [{
    Generation's cache update. `input` holds T new tokens of each of B
    sequences, token t of sequence b at position `positions[b] + t`: with
    `section`, a fused `[B, T, 3C]` qkv as for `tp.attention`, of which the
    keys or values are written; without, the keys or values themselves,
    `[B, T, H D]`. `cache` is `[L, B, H, N, D]`: the keys (or values) of
    every layer, sequence, head and position (N the context, H =
    `num_heads` the heads the cache holds). The result is `cache` with the
    chunk written into layer `layer` at those positions; the lowering
    writes the cache's buffer in place, so the cache is threaded from layer
    to layer and read only before it is written again. A position beyond
    the cache is a runtime error.

    It splits by whole heads, as `tp.attention`: after tp-partition each
    rank keeps the cache of its own `H / TP` heads. Like attention it is a
    Megatron region op, so that the GEMM writing the values it stores is
    split by columns.

    Example:

    ```mlir
    %k1 = tp.kv_cache_store %qkv, %k, %pos layer = 0 section = key heads = 4
        : tensor<2x1x192xf32>, tensor<2x2x4x64x16xf32>, tensor<2xi32>
    %k2 = tp.kv_cache_store %keys, %k, %pos layer = 0 heads = 2
        : tensor<2x1x32xf32>, tensor<2x2x2x64x16xf32>, tensor<2xi32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, TP_FloatTensor:$cache,
                   TP_IndexTensor:$positions,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$layer,
                   OptionalAttr<TP_CacheSection>:$section,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_heads);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cache `,` $positions `layer` `=` $layer
    (`section` `=` $section^)? `heads` `=` $num_heads attr-dict `:`
    type($input) `,` type($cache) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def TP_CachedAttentionOp : TP_Op<"cached_attention", [DeclareOpInterfaceMethods<TP_MegatronRegionOpInterface, ["getColumnSections", "getColumnHeads", "verifyTensorParallelSize"]>, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface, ["partition"]>, AllTypesMatch<["k_cache", "v_cache"]>]> {
  let summary = "Causal attention of a chunk of tokens over a KV cache";
  let description = [{
    Generation's attention: the queries of `queries` (token t of sequence b
    at position `positions[b] + t`) attend to the keys and values of layer
    `layer` of `k_cache` and `v_cache` (`[L, B, KV, N, D]`, which
    `tp.kv_cache_store` filled with this chunk's) at positions 0 to their
    own (causal), as `softmax(q k^T / sqrt(D)) v`. `queries` is a fused
    `[B, T, 3C]` qkv as for `tp.attention` (its q section read; KV =
    `num_heads`), or, with `kv_heads`, the queries alone `[B, T, H D]` of H
    = `num_heads` heads over caches of KV = `kv_heads` heads (query head h
    reads cache head `h / (H / KV)`). The result is `[B, T, H D]`, heads
    concatenated.

    Like `tp.attention` it splits by whole heads of the queries and of the
    caches. It has no gradient: generation is not trained.

    Example:

    ```mlir
    %a = tp.cached_attention %qkv, %k1, %v1, %pos layer = 0 heads = 4
        : tensor<2x1x192xf32>, tensor<2x2x4x64x16xf32>, tensor<2xi32>
        -> tensor<2x1x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$queries, TP_FloatTensor:$k_cache,
                   TP_FloatTensor:$v_cache, TP_IndexTensor:$positions,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$layer,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$kv_heads);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $queries `,` $k_cache `,` $v_cache `,` $positions `layer` `=` $layer
    `heads` `=` $num_heads (`kv_heads` `=` $kv_heads^)? attr-dict `:`
    type($queries) `,` type($k_cache) `,` type($positions) `->`
    type($result)
  }];
  let extraClassDeclaration = [{
    /// The cache's heads: kv_heads, or num_heads for a fused qkv.
    int64_t getKeyValueHeads() {
      return getKvHeads().value_or(getNumHeads());
    }
  }];
  let hasVerifier = 1;
}

def TP_PositionEmbeddingAtOp : TP_Op<"position_embedding_at", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>]> {
  let summary = "Position embedding of each sequence's chunk from its own start";
  let description = [{
    Generation's `tp.position_embedding`: `table` is [N, C], `positions` [B]
    and the result [B, T, C] holds row `positions[b] + t` at `[b, t]`. A
    position beyond the table reads its last row; the cache rejects it in
    the same step (`tp.cached_attention`). Only the width may be split.

    Example:

    ```mlir
    %pos = tp.position_embedding_at %wpe, %start
        : tensor<64x64xf32>, tensor<2xi32> -> tensor<2x1x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$table, TP_IndexTensor:$positions);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $positions attr-dict `:` type($table) `,` type($positions)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def TP_TakePositionOp : TP_Op<"take_position", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>]> {
  let summary = "Each sequence's activation at one column of its chunk";
  let description = [{
    `input` is [B, T, C] and `index` [B]; the result [B, C] is
    `input[b, index[b], :]`: the last prompt token's hidden state, whose
    logits give the first new token (an index beyond T reads column T - 1).
    The batch and the width may be split; the chunk stays whole.

    Example:

    ```mlir
    %h = tp.take_position %x, %last
        : tensor<2x8x64xf32>, tensor<2xi32> -> tensor<2x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, TP_IndexTensor:$index);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $index attr-dict `:` type($input) `,` type($index) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def TP_SoftmaxOp : TP_Op<"softmax", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, DeclareOpInterfaceMethods<TP_VJPOpInterface>, SameOperandsAndResultType]> {
  let summary = "Softmax along one dimension";
  let description = [{
    `exp(x - max) / sum(exp(x - max))` along dimension `dim`; the result has
    the input's type. Under sharding `dim` stays whole and the other
    dimensions may be split. tp-mixed-precision keeps it in fp32, since its
    lowering accumulates in the element type. The gradient is
    `tp.softmax_grad`.

    Example:

    ```mlir
    %p = tp.softmax %scores dim = 2 : tensor<2x32x32xf32>
    ```
  }];
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

    The op absorbs a split of the vocabulary dimension. With the logits split
    by vocabulary (Megatron's LM head), tp-partition replaces it with the
    vocabulary-parallel pieces `tp.xent_max`, `tp.xent_sum_exp` and
    `tp.xent_loss` around all-reduces of per-token statistics, so the logits
    are never gathered; unsplit logits get the same pieces without the
    all-reduces. The op has no gradient rule of its own: tp-autodiff
    differentiates the pieces.

    Example:

    ```mlir
    %loss = tp.cross_entropy %logits, %targets valid_vocab = 500 : tensor<2x32x512xf32>, tensor<2x32xi32> -> tensor<f32>
    ```
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
    row. tp.matmul's gradient rule builds it as `X^T dY` (as `dY^T X` for a
    `transpose_rhs` weight). The result may be wider than the operands: the
    fp32 gradient of bf16 activations (tp-mixed-precision).

    Example:

    ```mlir
    %dw = tp.weight_grad %x, %dy : tensor<2x32x64xf32>, tensor<2x32x256xf32> -> tensor<64x256xf32>
    ```
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
  let description = [{
    The result's shape is a suffix of the input's; each result element is the
    sum of the input over the leading dimensions. tp.bias_add's gradient rule
    builds it for the bias: `[B, T, C] -> [C]` for a GEMM's bias,
    `[B, T, C] -> [T, C]` for the position embedding. The result may be wider
    than the input (fp32 sums of bf16 gradients).

    Example:

    ```mlir
    %db = tp.sum_to %dy : tensor<2x32x256xf32> -> tensor<256xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def TP_GeluGradOp : TP_Op<"gelu_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of tp.gelu at `input` times `grad`";
  let description = [{
    `gelu'(input) * grad` elementwise, where `gelu'` is the derivative of
    tp.gelu's tanh approximation, `input` is tp.gelu's input and `grad` the
    gradient of its result. Operands and result have one type. Built by
    tp.gelu's gradient rule.

    Example:

    ```mlir
    %dh = tp.gelu_grad %h, %da : tensor<2x32x256xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, TP_FloatTensor:$grad);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def TP_SwiGLUGradOp : TP_Op<"swiglu_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure,
    AllTypesMatch<["gate", "up", "grad", "gate_grad", "up_grad"]>]> {
  let summary = "Gradients of tp.swiglu at `gate` and `up` given `grad`";
  let description = [{
    With `s = sigmoid(gate)`: the gradient of the gate,
    `grad * up * s * (1 + gate * (1 - s))`, and of up, `grad * silu(gate)`,
    elementwise. All operands and results have one type. Built by
    tp.swiglu's gradient rule.

    Example:

    ```mlir
    %dg, %du = tp.swiglu_grad %gate, %up, %da : tensor<2x32x256xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$gate, TP_FloatTensor:$up,
                       TP_FloatTensor:$grad);
  let results = (outs TP_FloatTensor:$gate_grad, TP_FloatTensor:$up_grad);
  let assemblyFormat = "$gate `,` $up `,` $grad attr-dict `:` type($grad)";
}

def TP_SoftmaxGradOp : TP_Op<"softmax_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of tp.softmax from its output: y * (dy - sum(dy * y))";
  let description = [{
    From tp.softmax's result `output` (y) and that result's gradient `grad`
    (dy), the gradient of the input: `y * (dy - sum(dy * y))`, the sum taken
    along `dim`. Operands and result have one type. Built by tp.softmax's
    gradient rule.

    Example:

    ```mlir
    %ds = tp.softmax_grad %p, %dp dim = 2 : tensor<2x32x32xf32>
    ```
  }];
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
    From tp.layer_norm's `input` `[..., C]` and `weight` `[C]` and the
    gradient `grad` of its result, the gradients of the input (the input's
    type), of the weight and of the bias (`[C]` each, of one type); the bias
    itself is not needed. `epsilon` is the forward op's. The mean and
    reciprocal standard deviation are recomputed from `input` rather than
    kept from the forward pass.

    The parameter gradients may be wider than the weight: fp32 gradients of
    the bf16 copy of an fp32 master weight (tp-mixed-precision).

    Example:

    ```mlir
    %dx, %dw, %db = tp.layer_norm_grad %x, %w, %dy {epsilon = 1.0e-05 : f32} : tensor<2x32x64xf32>, tensor<64xf32> -> tensor<64xf32>
    ```
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

def TP_RMSNormGradOp : TP_Op<"rms_norm_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure,
    AllTypesMatch<["input", "grad", "input_grad"]>,
    AllShapesMatch<["weight", "weight_grad"]>]> {
  let summary = "Gradients of tp.rms_norm; its statistics are recomputed";
  let description = [{
    From tp.rms_norm's `input` `[..., C]` and `weight` `[C]` and the
    gradient `grad` of its result, the gradients of the input (the input's
    type) and of the weight (`[C]`). `epsilon` is the forward op's. The
    reciprocal root mean square of each row is recomputed from `input`.

    The weight gradient may be wider than the weight: fp32 gradients of
    the bf16 copy of an fp32 master weight (tp-mixed-precision).

    Example:

    ```mlir
    %dx, %dw = tp.rms_norm_grad %x, %w, %dy {epsilon = 1.0e-05 : f32} : tensor<2x32x64xf32>, tensor<64xf32> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, TP_FloatTensor:$weight,
                       TP_FloatTensor:$grad, F32Attr:$epsilon);
  let results = (outs TP_FloatTensor:$input_grad, TP_FloatTensor:$weight_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $input `,` $weight `,` $grad attr-dict `:` type($input) `,` type($weight)
    `->` type($weight_grad)
  }];
}

def TP_AttentionGradOp : TP_Op<"attention_grad", [AttrSizedOperandSegments, DeclareOpInterfaceMethods<TP_DropoutOpInterface>, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure]> {
  let summary = "Gradient of tp.attention; probabilities are recomputed";
  let description = [{
    From the gradient `grad` `[B, T, H D]` of tp.attention's result and
    its `inputs` (a fused qkv, or q, k and v), the gradient of each input,
    of the input's type (a fused gradient for a fused qkv). `num_heads` and
    `kv_heads` are the forward op's (per rank after tp-partition); a
    key/value head's gradient sums those of the query heads reading it. The
    forward pass keeps no probabilities: they are recomputed from q and k,
    so the T x T matrix is never stored; their dropout mask (the forward
    op's dropout arguments) too.

    Example:

    ```mlir
    %dqkv = tp.attention_grad %da, %qkv heads = 4 : tensor<2x32x64xf32>, tensor<2x32x192xf32> -> tensor<2x32x192xf32>
    ```
  }];
  let arguments = !con(
      (ins TP_FloatTensor:$grad, Variadic<TP_FloatTensor>:$inputs,
           ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
           OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$kv_heads),
      TP_ProbabilityDropoutArgs.args);
  let results = (outs Variadic<TP_FloatTensor>:$input_grads);
  let assemblyFormat = [{
    $grad `,` $inputs `heads` `=` $num_heads (`kv_heads` `=` $kv_heads^)?
    }] # !strconcat(TP_ProbabilityDropoutArgs.format, [{
    attr-dict `:` type($grad) `,` type($inputs) `->` type($input_grads)
  }]);
  let extraClassDeclaration = [{
    int64_t getKeyValueHeads() {
      return getKvHeads().value_or(getNumHeads());
    }
  }];
  let hasVerifier = 1;
}

def TP_EmbeddingGradOp : TP_Op<"embedding_grad", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure]> {
  let summary = "Gradient of tp.embedding's table: rows summed by id";
  let description = [{
    `grad` is the gradient `[..., C]` of tp.embedding's result and `ids` its
    ids; the result `[V, C]` holds in each row the sum of `grad` over the
    tokens with that id, and zeros in rows no id selects.

    Rows for ids outside [offset, offset + V) belong to another rank's
    vocabulary slice and are skipped, so the gradient of a vocabulary-split
    table needs no communication. The result may be wider than `grad`.

    Example:

    ```mlir
    %dwte = tp.embedding_grad %dx[%ids] offset %start : tensor<2x32x64xf32>, tensor<2x32xi32> -> tensor<256x64xf32>
    ```
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
  let description = [{
    `grad` is the gradient `[T, C]` of tp.position_embedding's result; the
    result `[N, C]` is `grad` in its first T rows and zeros in the others.
    tp-mixed-precision keeps it in fp32.

    Example:

    ```mlir
    %dwpe = tp.position_embedding_grad %dpos : tensor<32x64xf32> -> tensor<1024x64xf32>
    ```
  }];
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
    no communication. `tokens` is `mean_over` where the loss has it (a
    batch split over data-parallel ranks), this rank's tokens otherwise.

    `logits` holds the global vocabulary columns starting at `offset`;
    columns at or above `valid_vocab` are padding and get zero. `max` and
    `sum_exp` are the per-token statistics after their all-reduces,
    `targets` the class ids and `loss_grad` the gradient of the scalar loss;
    the result has the logits' type. tp.xent_loss's gradient rule builds it.

    Example:

    ```mlir
    %dlogits = tp.xent_grad %logits, %max, %sum_exp, %targets, %dloss offset %start valid_vocab = 500 : tensor<2x32x256xf32>, tensor<2x32xf32>, tensor<2x32xi32>, tensor<f32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$logits, TP_FloatTensor:$max,
                       TP_FloatTensor:$sum_exp, TP_IndexTensor:$targets,
                       TP_Scalar:$loss_grad, Index:$offset,
                       ConfinedAttr<I64Attr, [IntPositive]>:$valid_vocab,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$mean_over);
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
    Accumulated in double and rounded once to the f32 result. One op sums a
    group of gradients (tp-optimizer makes one for the sharded and one for
    the replicated), so the runtime reads one number back for the group, not
    one per gradient: on a GPU each read is a synchronisation. The sharded
    group's sum is then all-reduced over its axis.

    Example:

    ```mlir
    %ss = tp.sum_squares %dw, %db : tensor<64x256xf32>, tensor<256xf32>
    ```
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

    ```
    param *= 1 - lr * weight_decay          (only with `decay`)
    exp_avg += (1 - beta1) * (g - exp_avg)
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
    param -= lr / (1 - beta1^t) * exp_avg
             / (sqrt(exp_avg_sq) / sqrt(1 - beta2^t) + eps)
    ```

    in torch.optim.AdamW's order. `hyperparameters` is
    [lr, beta1, beta2, eps, weight_decay, grad_clip, step, 0].

    `param`, `grad`, the two moments and the three results (the new
    parameter and moments) have one type. tp-optimizer builds one per
    parameter, with `decay` on 2-D weights only, `grad_scale` the f32
    factor of global-norm clipping and `apply` whether the step's loss and
    gradient norm are finite: where it is false, the results are the
    parameter and moments unchanged (the launcher then stops or skips the
    step).

    Example:

    ```mlir
    %p1, %m1, %v1 = tp.adamw %p, %dp, %m, %v, %hp, %scale if %finite {decay} : tensor<64x256xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$param, TP_FloatTensor:$grad,
                       TP_FloatTensor:$exp_avg, TP_FloatTensor:$exp_avg_sq,
                       StaticShapeTensorOf<[F32]>:$hyperparameters,
                       F32:$grad_scale, I1:$apply, UnitAttr:$decay);
  let results = (outs TP_FloatTensor:$new_param, TP_FloatTensor:$new_exp_avg,
                      TP_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $hyperparameters `,`
    $grad_scale `if` $apply attr-dict `:` type($param) `,` type($hyperparameters)
  }];
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel cross-entropy, in the pieces between its all-reduces
//===----------------------------------------------------------------------===//

def TP_XentMaxOp : TP_Op<"xent_max", [DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure]> {
  let summary = "Per-token maximum over this rank's real vocabulary columns";
  let description = [{
    `logits` (`[..., Vl]`) holds the global vocabulary columns
    [offset, offset + Vl); only columns below `valid_vocab` are real. The
    result `[...]` holds one maximum per token. A rank without real columns
    gives -inf. An all-reduce (max) over the vocabulary axis follows.

    Example:

    ```mlir
    %lmax = tp.xent_max %logits offset %start valid_vocab = 500 : tensor<2x32x256xf32> -> tensor<2x32xf32>
    %max = tp.all_reduce max %lmax over @m["tp"] : tensor<2x32xf32>
    ```
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
    Given the all-reduced per-token `max`, the sum of exp(logit - max) over
    this rank's real columns, and the logit of each token's target. Both
    results are this rank's share, of `max`'s type: the target logit is 0
    where the target is another rank's column. All-reduces (sum) over the
    vocabulary axis complete them.

    Example:

    ```mlir
    %se, %tl = tp.xent_sum_exp %logits, %max, %targets offset %start valid_vocab = 500 : tensor<2x32x256xf32>, tensor<2x32xi32> -> tensor<2x32xf32>
    ```
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
  let description = [{
    The last piece of the vocabulary-parallel cross-entropy: from the
    all-reduced per-token `sum_exp`, `max` and `target_logit` (`[...]`, one
    type), the scalar mean over tokens of `log(sum_exp) + max - target_logit`.
    With `mean_over`, the sum over this rank's tokens divided by that many
    tokens instead: the rank's share of the mean over a batch split across
    data-parallel ranks, which an all-reduce over them completes.

    Its gradient rule needs `sum_exp` to come from a `tp.xent_sum_exp`
    (directly or through an all-reduce) and builds a `tp.xent_grad` on that
    op's logits. The max and the sum of exponentials are statistics of the
    logits whose own gradients cancel in (softmax - onehot), so the backward
    pass needs no communication.

    Example:

    ```mlir
    %loss = tp.xent_loss %se, %max, %tl : tensor<2x32xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$sum_exp, TP_FloatTensor:$max,
                       TP_FloatTensor:$target_logit,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$mean_over);
  let results = (outs TP_Scalar:$loss);
  let assemblyFormat = [{
    $sum_exp `,` $max `,` $target_logit attr-dict `:` type($sum_exp) `->`
    type($loss)
  }];
}

//===----------------------------------------------------------------------===//
// Precision
//===----------------------------------------------------------------------===//

def TP_ConvertOp : TP_Op<"convert", [TP_SelectiveRecompute, DeclareOpInterfaceMethods<TP_PrecisionOpInterface>, Pure, AllShapesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>]> {
  let summary = "Rounds (or widens) every element to another float type";
  let description = [{
    Built by tp-mixed-precision: the bf16 copy of an fp32 master weight, made
    once per step, and the way back to fp32 where a bf16 value meets an fp32
    consumer. Narrowing rounds to nearest, ties to even. The shape is
    unchanged; under sharding the op is elementwise.

    Example:

    ```mlir
    %wb = tp.convert %w : tensor<64x256xf32> -> tensor<64x256xbf16>
    ```
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
    collectives or local slices that move the data: a `tp.all_gather` for
    each dimension that stops being split, a `tp.local_slice` for each that
    starts being split. A dimension split into sections cannot be resharded.

    Example:

    ```mlir
    %whole = tp.reshard %h {tp.sharding = #tp.sharding<@m, [[], []]>} : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def TP_AxisIndexOp : TP_Op<"axis_index", [Pure, TP_MeshAxisUser]> {
  let summary = "This rank's index along a mesh axis (a runtime value)";
  let description = [{
    The index, in [0, size), of the executing rank along axis `axis` of mesh
    `mesh`. Since it is a runtime value rather than a constant, one per-rank
    program serves every rank. tp-partition uses it for the first global row
    a rank holds of a vocabulary-split table or logits: the index times the
    local row count.

    Example:

    ```mlir
    %rank = tp.axis_index @m["tp"]
    %rows = arith.constant 256 : index
    %start = arith.muli %rank, %rows : index
    ```
  }];
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
        [TP_CollectiveOpInterface,
         DeclareOpInterfaceMethods<TP_PrecisionOpInterface>,
         DeclareOpInterfaceMethods<TP_VJPOpInterface>])> {
  /// More of the op's class declaration (a reducing op's reduction).
  code extraCollectiveDeclaration = "";
  let extraClassDeclaration = [{
    ::mlir::tp::CollectiveKind getCollectiveKind() {
      return ::mlir::tp::CollectiveKind::}] # kind # [{;
    }
    ::llvm::SmallVector<::mlir::Value, 1> getCollectiveTensors() {
      return {}] # tensor # [{()};
    }
  }] # extraCollectiveDeclaration;
}

def TP_FOp : TP_CollectiveOp<"f", "identity", "getResult", [TP_SelectiveRecompute, Pure, TP_MeshAxisUser, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, SameOperandsAndResultType]> {
  let summary = "Megatron's f: identity forward, all-reduce of the gradient backward";
  let description = [{
    The first of Megatron-LM's conjugate pair. Forward it is the identity;
    backward, the gradient, which each rank holds as a partial sum, is
    all-reduced (sum) over `axis`. tp-insert-conjugates places it where a
    replicated float value enters an op whose results are split or partial
    over the axis, such as the input of a column-parallel GEMM. The runtime
    lowering forwards the input unchanged.

    Example:

    ```mlir
    %xf = tp.f %x over @m["tp"] : tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, FlatSymbolRefAttr:$mesh, StrAttr:$axis);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input `over` $mesh `[` $axis `]` attr-dict `:` type($result)";
  let hasCanonicalizer = 1;
}

def TP_GOp : TP_CollectiveOp<"g", "all_reduce", "getResult", [TP_MeshAxisUser, DeclareOpInterfaceMethods<TP_ShardingRuleOpInterface>, SameOperandsAndResultType]> {
  let summary = "Megatron's g: all-reduce forward, identity backward";
  let description = [{
    The second of Megatron-LM's conjugate pair. Forward it sums the ranks'
    partial values over `axis` (an all-reduce); backward it passes the
    gradient through unchanged, since every rank already holds it whole.
    tp-insert-conjugates places it where a partial sum, such as the output of
    a row-parallel GEMM or of a vocabulary-split embedding, meets an op that
    needs the value whole. Its sharding rule accepts a partial-sum operand;
    before the other ops, tp-insert-conjugates completes partial sums with a
    `tp.g`.

    Example:

    ```mlir
    %y = tp.g %partial over @m["tp"] : tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, FlatSymbolRefAttr:$mesh, StrAttr:$axis);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$input `over` $mesh `[` $axis `]` attr-dict `:` type($result)";
}

def TP_AllReduceOp : TP_CollectiveOp<"all_reduce", "all_reduce", "getResult", [TP_MeshAxisUser, SameOperandsAndResultType]> {
  let summary = "Reduces a tensor across the ranks of a mesh axis";
  let description = [{
    Combines `input` elementwise over the ranks of `axis` with `kind` (`sum`
    or `max`); every rank receives the result, of the input's type, which may
    be any statically shaped tensor. tp-partition emits it for the statistics
    of the vocabulary-parallel cross-entropy, tp-autodiff as the gradient of
    `tp.f`, tp-optimizer for the sharded gradients' sum of squares. The
    gradient of a sum is the identity; a max has no gradient rule.

    Example:

    ```mlir
    %max = tp.all_reduce max %lmax over @m["tp"] : tensor<2x32xf32>
    ```
  }];
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

def TP_AllReduceBucketOp : TP_Op<"all_reduce_bucket", [
    TP_MeshAxisUser,
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    TP_CollectiveOpInterface,
    DeclareOpInterfaceMethods<TP_PrecisionOpInterface>]> {
  let summary = "Sums several fp32 tensors across the ranks of a mesh axis at once";
  let description = [{
    The data-parallel gradient reduction in buckets: each result is the sum
    of its input over the ranks of `axis`, as `tp.all_reduce sum` gives,
    but the reductions are issued together and waited for once (one NCCL
    group; nonblocking MPI collectives), so a step pays the latency of a
    collective per bucket rather than per gradient. tp-bucket-reductions
    forms the buckets after tp-optimizer, which is why the op has no
    gradient rule. Inputs are fp32 (gradients stay fp32 in every precision).

    Example:

    ```mlir
    %dw, %db = tp.all_reduce_bucket sum %w_grad, %b_grad over @mesh["dp"] : tensor<64x256xf32>, tensor<256xf32>
    ```
  }];
  let arguments = (ins Variadic<TP_F32Tensor>:$inputs, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis);
  let results = (outs Variadic<TP_F32Tensor>:$results);
  let assemblyFormat = [{
    `sum` $inputs `over` $mesh `[` $axis `]` attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::tp::CollectiveKind getCollectiveKind() {
      return ::mlir::tp::CollectiveKind::all_reduce;
    }
    ::llvm::SmallVector<::mlir::Value, 1> getCollectiveTensors() {
      return ::llvm::SmallVector<::mlir::Value, 1>(getResults());
    }
  }];
}

def TP_AllReduceStartOp : TP_Op<"all_reduce_start", [
    TP_MeshAxisUser,
    TP_CollectiveOpInterface,
    TP_StartOpInterface]> {
  let summary = "Starts summing (or maxing) tensors across a mesh axis";
  let description = [{
    The first half of a nonblocking all-reduce: the ranks of `axis` start
    combining each of `inputs` with `kind`, and the one `tp.wait` of the
    result gives the reduced tensors. Between the two, the rank computes
    what does not need the sums: tp-overlap-collectives splits a
    `tp.all_reduce` (or a bucket) so that the gradient of a column-parallel
    GEMM's input is reduced while its weight gradient is computed, and a
    data-parallel gradient bucket while the rest of the backward pass runs.
    Every rank starts its collectives in the same order, as one program
    does; the runtime then completes them in that order.

    Example:

    ```mlir
    %p = tp.all_reduce_start sum %dx over @m["tp"] : tensor<2x32x64xf32>
    %dw = tp.weight_grad %x, %dy : tensor<2x32x64xf32>, tensor<2x32x96xf32> -> tensor<64x96xf32>
    %sum = tp.wait %p : tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyStaticShapeTensor>:$inputs,
                       TP_ReductionKind:$kind, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis);
  let results = (outs TP_PendingType:$pending);
  let assemblyFormat = [{
    $kind $inputs `over` $mesh `[` $axis `]` attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::tp::CollectiveKind getCollectiveKind() {
      return ::mlir::tp::CollectiveKind::all_reduce;
    }
    ::llvm::SmallVector<::mlir::Value, 1> getCollectiveTensors() {
      return ::llvm::SmallVector<::mlir::Value, 1>(getInputs());
    }
    ::mlir::tp::ReductionKind getCollectiveReduction() { return getKind(); }
  }];
}

def TP_WaitOp : TP_Op<"wait"> {
  let summary = "Waits for a started collective and gives its results";
  let description = [{
    Completes the started collective (`tp.all_reduce_start`,
    `tp.reduce_scatter_start`, `tp.all_gather_start`) that defined
    `pending`: its results are the start's inputs reduced over the axis (for
    a reduce-scatter, this rank's rows of them; for an all-gather, the
    whole tensors whose rows they are), in the same order. A start has exactly one wait, later in
    the same block.

    Example:

    ```mlir
    %sum = tp.wait %p : tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins TP_PendingType:$pending);
  let results = (outs Variadic<AnyStaticShapeTensor>:$results);
  let assemblyFormat = "$pending attr-dict `:` type($results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The start it completes; null when no start defined its handle.
    StartOpInterface getStart();
  }];
}

def TP_AllGatherOp : TP_CollectiveOp<"all_gather", "all_gather", "getResult", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Concatenates the ranks' tensors along one dimension";
  let description = [{
    Each rank's `input` is one chunk; the result concatenates the chunks of
    the ranks of `axis`, in rank order, along dimension `dim`, which grows by
    the axis size. tp-partition emits it where a `tp.reshard` makes a split
    dimension whole. The gradient of its input is this rank's
    `tp.local_slice` of the result's gradient. The runtime
    lowering handles only a `dim` preceded by unit dimensions, where the
    chunks are contiguous.

    Example:

    ```mlir
    %whole = tp.all_gather %h over @m["tp"] dim = 1 : tensor<8x32xf32> -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis, I64Attr:$dim);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `dim` `=` $dim attr-dict `:`
    type($input) `->` type($result)
  }];
}

def TP_SPGatherOp : TP_CollectiveOp<"sp_gather", "all_gather", "getResult", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Sequence parallelism's all-gather into a tensor-parallel region";
  let description = [{
    Forward, the `tp.all_gather` of `input` along `dim`; but the gathered
    value enters a region whose ops split their results over `axis` (a
    column-parallel GEMM), so each rank's cotangent of it is a partial sum,
    as `tp.f` takes it. Its gradient is therefore the `tp.reduce_scatter`
    of the cotangent along `dim`: the sum `tp.f` would all-reduce and the
    chunk the gather's own gradient keeps, in one collective. The
    canonicalisation of `tp.f` folds a `tp.f` of a `tp.all_gather` over the
    same axis into it (sequence parallelism's entry into a region).

    Example:

    ```mlir
    %x = tp.sp_gather %xs over @m["tp"] dim = 1 : tensor<2x16x64xf32> -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis, I64Attr:$dim);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `dim` `=` $dim attr-dict `:`
    type($input) `->` type($result)
  }];
}

def TP_ReduceScatterOp : TP_CollectiveOp<"reduce_scatter", "reduce_scatter", "getInput", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reduces across ranks, each rank keeping its chunk of one dimension";
  let description = [{
    Combines `input` over the ranks of `axis` with `kind`, each rank keeping
    its chunk of the result along dimension `dim`, which shrinks by the axis
    size. For `sum` the gradient is a `tp.all_gather` along `dim`; a max has
    no gradient rule. The runtime lowering handles `sum` only, and only a
    `dim` preceded by unit dimensions.

    Example:

    ```mlir
    %rs = tp.reduce_scatter sum %y over @m["tp"] dim = 0 : tensor<8x64xf32> -> tensor<4x64xf32>
    ```
  }];
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

def TP_ReduceScatterBucketOp : TP_Op<"reduce_scatter_bucket", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    TP_CollectiveOpInterface,
    DeclareOpInterfaceMethods<TP_PrecisionOpInterface>]> {
  let summary = "Reduce-scatters several fp32 tensors by rows across a mesh axis at once";
  let description = [{
    ZeRO-1's data-parallel gradient reduction in buckets: each result is
    this rank's rows (dimension 0) of the sum of its input over the ranks of
    `axis`, as `tp.reduce_scatter sum ... dim = 0` gives, but the
    reductions are issued together and waited for once, so a step pays a
    collective's latency per bucket rather than per gradient.
    tp-bucket-reductions forms the buckets after tp-optimizer, which is why
    the op has no gradient rule. Inputs are fp32 (gradients stay fp32 in
    every precision).

    Example:

    ```mlir
    %dw, %db = tp.reduce_scatter_bucket sum %w_grad, %b_grad over @mesh["dp"] : tensor<64x256xf32>, tensor<256xf32> -> tensor<32x256xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins Variadic<TP_F32Tensor>:$inputs, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis);
  let results = (outs Variadic<TP_F32Tensor>:$results);
  let assemblyFormat = [{
    `sum` $inputs `over` $mesh `[` $axis `]` attr-dict `:` type($inputs)
    `->` type($results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::tp::CollectiveKind getCollectiveKind() {
      return ::mlir::tp::CollectiveKind::reduce_scatter;
    }
    ::llvm::SmallVector<::mlir::Value, 1> getCollectiveTensors() {
      return ::llvm::SmallVector<::mlir::Value, 1>(getInputs());
    }
  }];
}

def TP_ReduceScatterStartOp : TP_Op<"reduce_scatter_start", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    TP_CollectiveOpInterface,
    TP_StartOpInterface]> {
  let summary = "Starts reduce-scattering fp32 tensors by rows across a mesh axis";
  let description = [{
    The first half of a nonblocking reduce-scatter: the ranks of `axis`
    start summing each of `inputs`, and the one `tp.wait` of the result
    gives each rank its rows (dimension 0, split by the axis size) of the
    sums. tp-overlap-collectives splits a ZeRO-1 gradient reduce-scatter
    (or a bucket of them) so that it runs while the rest of the backward
    pass computes. Inputs are fp32, as the gradients it reduces are.

    Example:

    ```mlir
    %p = tp.reduce_scatter_start sum %dw over @m["dp"] : tensor<64x96xf32>
    %dx = tp.matmul %dy, %w : tensor<2x32x96xf32>, tensor<96x64xf32> -> tensor<2x32x64xf32>
    %rows = tp.wait %p : tensor<32x96xf32>
    ```
  }];
  let arguments = (ins Variadic<TP_F32Tensor>:$inputs, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis);
  let results = (outs TP_PendingType:$pending);
  let assemblyFormat = [{
    `sum` $inputs `over` $mesh `[` $axis `]` attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::tp::CollectiveKind getCollectiveKind() {
      return ::mlir::tp::CollectiveKind::reduce_scatter;
    }
    ::llvm::SmallVector<::mlir::Value, 1> getCollectiveTensors() {
      return ::llvm::SmallVector<::mlir::Value, 1>(getInputs());
    }
  }];
}

def TP_AllGatherStartOp : TP_Op<"all_gather_start", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    TP_CollectiveOpInterface,
    TP_StartOpInterface]> {
  let summary = "Starts gathering tensors by rows across a mesh axis";
  let description = [{
    The first half of a nonblocking all-gather: each of `inputs` is this
    rank's rows (dimension 0) of a tensor, and the one `tp.wait` of the
    result gives each whole tensor, the ranks' rows of `axis` in rank order.
    tp-overlap-collectives splits ZeRO-1's all-gather of the updated
    parameter rows, so that it runs while the rank updates its other
    parameters.

    Example:

    ```mlir
    %p = tp.all_gather_start %rows over @m["dp"] : tensor<32x96xbf16>
    %new:3 = tp.adamw %w2, %g2, %m2, %v2, %hp, %scale if %apply : tensor<96xf32>, tensor<8xf32>
    %w = tp.wait %p : tensor<64x96xbf16>
    ```
  }];
  let arguments = (ins Variadic<AnyStaticShapeTensor>:$inputs,
                       FlatSymbolRefAttr:$mesh, StrAttr:$axis);
  let results = (outs TP_PendingType:$pending);
  let assemblyFormat = [{
    $inputs `over` $mesh `[` $axis `]` attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::tp::CollectiveKind getCollectiveKind() {
      return ::mlir::tp::CollectiveKind::all_gather;
    }
    /// The whole tensors it assembles: its wait's results.
    ::llvm::SmallVector<::mlir::Value, 1> getCollectiveTensors() {
      return ::llvm::SmallVector<::mlir::Value, 1>(getWait()->getResults());
    }
  }];
}

def TP_LocalSliceOp : TP_CollectiveOp<"local_slice", "local_slice", "getResult", [DeclareOpInterfaceMethods<SymbolUserOpInterface>, Pure]> {
  let summary = "This rank's chunk of a replicated tensor along one dimension";
  let description = [{
    This rank's chunk of `input` along `dim`: the slice that starts at the
    rank's index along `axis` times the result's size there; the dimension
    shrinks by the axis size. No communication: the rank index along the axis
    is a runtime value, so one program serves every rank. tp-partition emits
    it where a `tp.reshard` splits a whole dimension; it is also the gradient
    of `tp.all_gather`.

    Example:

    ```mlir
    %ws = tp.local_slice %w over @m["tp"] dim = 0 : tensor<64x16xf32> -> tensor<32x16xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis, I64Attr:$dim);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `dim` `=` $dim attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasCanonicalizer = 1;
}

#endif // MEGATRON_DIALECT_TP_IR_TPOPS_TD
