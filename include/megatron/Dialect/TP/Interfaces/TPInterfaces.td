//===- TPInterfaces.td - tp op interfaces ------------------*- tablegen -*-===//
#ifndef MEGATRON_DIALECT_TP_INTERFACES_TPINTERFACES_TD
#define MEGATRON_DIALECT_TP_INTERFACES_TPINTERFACES_TD

include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

// What collectives do, as CollectiveOpInterface states it.
def TP_ReductionKind : I32EnumAttr<"ReductionKind", "collective reduction",
    [I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>]> {
  let cppNamespace = "::mlir::tp";
}

def TP_CollectiveKind : I32EnumAttr<"CollectiveKind", "what a collective does",
    [I32EnumAttrCase<"identity", 0>, I32EnumAttrCase<"all_reduce", 1>,
     I32EnumAttrCase<"all_gather", 2>, I32EnumAttrCase<"reduce_scatter", 3>,
     I32EnumAttrCase<"local_slice", 4>]> {
  let cppNamespace = "::mlir::tp";
  let genSpecializedAttr = 0;
}

def TP_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::tp";
  let description = [{
    Ops that say how their dimensions may be split across a mesh, and how
    they become one rank's op. Sharding propagation, conjugate insertion
    and the explain report all read the same rule, and tp-partition asks
    the op to partition itself, so an op's parallel semantics live in one
    place.
  }];
  let methods = [
    InterfaceMethod<"The op's factors and how they index its tensors.",
                    "::mlir::tp::ShardingRule", "getShardingRule">,
    InterfaceMethod<[{
      Makes the op one rank's, once tp-partition has given its operands and
      results their local types: fewer attention heads, an offset into a
      split vocabulary, the collectives of a split reduction. `context`
      holds the global shardings and the mesh. Most ops have nothing to do.
    }], "::llvm::LogicalResult", "partition",
      (ins "::mlir::tp::PartitionContext &":$context), [{}],
      [{ return ::mlir::success(); }]>,
  ];
}

def TP_VJPOpInterface : OpInterface<"VJPOpInterface"> {
  let cppNamespace = "::mlir::tp";
  let description = [{
    Ops that know their vector-Jacobian product. Given the gradients of the
    op's results (null where a result has none), `buildVJP` emits the
    backward ops at the builder's insertion point and hands each gradient
    contribution to `accumulate(value, gradient)`, usually for an operand;
    tp-autodiff sums contributions to one value. Megatron's conjugates are
    two such rules: the gradient of `f` is an all-reduce, that of `g` the
    identity.
  }];
  let methods = [
    InterfaceMethod<"Emits the backward ops of this op.",
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::function_ref<void(::mlir::Value, ::mlir::Value)>":$accumulate)>,
  ];
}

def TP_MegatronRegionOpInterface : OpInterface<"MegatronRegionOpInterface"> {
  let cppNamespace = "::mlir::tp";
  let description = [{
    Ops Megatron's plan (tp-megatron-annotate) places inside a
    tensor-parallel region: the GEMM producing each float operand is split
    by columns, the GEMMs consuming the result by rows, so the region needs
    one all-reduce at its end. Attention (whole heads of q, k and v) and
    GELU are such ops; a new block's nonlinearity (SwiGLU's) declares this
    interface instead of the planner learning its name.
  }];
  let methods = [
    InterfaceMethod<[{Sections of the producing GEMM's columns, each split
      separately (3 for attention's fused [q|k|v]).}],
      "int64_t", "getColumnSections", (ins), [{}], [{ return 1; }]>,
    InterfaceMethod<[{The whole heads the columns of the GEMM producing
      operand `operand` hold (per section), which ranks share by whole heads:
      where they are fewer than the ranks, each head's columns go to the
      tp / heads ranks that share it (grouped-query attention's key/value
      heads). 0 where any split of the columns will do.}],
      "int64_t", "getColumnHeads", (ins "unsigned":$operand), [{}],
      [{ return 0; }]>,
    InterfaceMethod<[{Checks that `tp` ranks can share the op; a located
      error otherwise.}],
      "::llvm::LogicalResult", "verifyTensorParallelSize", (ins "int64_t":$tp),
      [{}], [{ return ::mlir::success(); }]>,
  ];
}

def TP_DropoutOpInterface : OpInterface<"DropoutOpInterface"> {
  let cppNamespace = "::mlir::tp";
  let description = [{
    Ops that drop elements at random while training: tp.dropout an input's,
    attention its probabilities'. An element's mask bit is drawn from its
    index in the global tensor (megatron_rt/dropout.h), so a mask never
    depends on the layout: the op states where its elements sit (`offsets`
    into `global_shape`, which tp-partition sets; none means the op holds
    the whole tensor) and the site's `stream`. The seed and step come from
    the training step's hyperparameters (`key`), which tp-optimizer binds
    to every such op of the step; an op without a key, as in the forward
    entry that validation runs, drops nothing.
  }];
  let methods = [
    InterfaceMethod<"Whether the op drops at a rate above 0 while training.",
      "bool", "hasDropout">,
    InterfaceMethod<"The step's hyperparameters, null where the op drops "
                    "nothing.",
      "::mlir::Value", "getKey", (ins), [{}],
      [{ return $_op.getKey(); }]>,
    InterfaceMethod<"Draws the mask from `hyperparameters`' seed and step.",
      "void", "bindKey", (ins "::mlir::Value":$hyperparameters), [{}],
      [{ $_op.getKeyMutable().assign(hyperparameters); }]>,
  ];
}

def TP_PrecisionOpInterface : OpInterface<"PrecisionOpInterface"> {
  let cppNamespace = "::mlir::tp";
  let description = [{
    Ops that say what precision they compute in under bf16 mixed precision:
    bf16 activations, fp32 statistics, parameter gradients and optimizer
    state. tp-mixed-precision reads the rule of every op; a tp op on float
    tensors without one is an error, never a silent fp32 fallthrough.
  }];
  let methods = [
    InterfaceMethod<"The precision of the op's float operands and results.",
                    "::mlir::tp::PrecisionRule", "getPrecisionRule">,
  ];
}

def TP_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::mlir::tp";
  let description = [{
    Ops that move data between the ranks of one mesh axis. The performance
    model, the explain report and the lowering read what a collective does
    and over which axis from here, so a new collective states it once: its
    kind, and the tensors it covers (the whole tensors it reduces or
    assembles; a ring moves (N-1)/N of them per pass, `getRingPasses` of the
    kind say how many passes).
  }];
  let methods = [
    InterfaceMethod<"The mesh the collective runs on.",
      "::mlir::FlatSymbolRefAttr", "getCollectiveMesh", (ins), [{}],
      [{ return $_op.getMeshAttr(); }]>,
    InterfaceMethod<"The mesh axis whose ranks take part.",
      "::llvm::StringRef", "getCollectiveAxis", (ins), [{}],
      [{ return $_op.getAxis(); }]>,
    InterfaceMethod<"What the collective does.",
      "::mlir::tp::CollectiveKind", "getCollectiveKind">,
    InterfaceMethod<[{The whole tensors the collective reduces or assembles
      (its input for a reduce-scatter, its result otherwise; a bucket's
      every result), which it moves in one go.}],
      "::llvm::SmallVector<::mlir::Value, 1>", "getCollectiveTensors">,
    InterfaceMethod<"How a reducing collective combines the ranks' values.",
      "::mlir::tp::ReductionKind", "getCollectiveReduction", (ins), [{}],
      [{ return ::mlir::tp::ReductionKind::sum; }]>,
  ];
}

def TP_StartOpInterface : OpInterface<"StartOpInterface"> {
  let cppNamespace = "::mlir::tp";
  let description = [{
    The first half of a nonblocking collective: its `!tp.pending` result is
    completed by exactly one `tp.wait` later in its block, whose results are
    the collective's. tp-overlap-collectives makes the pairs; the explain
    report counts the compute between the two halves, and the performance
    model lets it run while the collective is in flight.
  }];
  let methods = [
    InterfaceMethod<"The handle its tp.wait completes.",
      "::mlir::Value", "getPending">,
    InterfaceMethod<"The tp.wait that completes it.",
      "::mlir::Operation *", "getWait", (ins), [{}],
      [{ return *$_op.getPending().user_begin(); }]>,
  ];
}

#endif // MEGATRON_DIALECT_TP_INTERFACES_TPINTERFACES_TD
