//===- TPAttrs.td - tp attributes and enums ----------------*- tablegen -*-===//
#ifndef MEGATRON_DIALECT_TP_IR_TPATTRS_TD
#define MEGATRON_DIALECT_TP_IR_TPATTRS_TD

include "megatron/Dialect/TP/IR/TPBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

// The value is the section's index in a fused [q|k|v] tensor.
def TP_CacheSection : I32EnumAttr<"CacheSection", "a KV cache's section",
    [I32EnumAttrCase<"key", 1>, I32EnumAttrCase<"value", 2>]> {
  let cppNamespace = "::mlir::tp";
}

def TP_ShardingAttr : AttrDef<TP_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "How a tensor is laid out over a tp.mesh";
  let description = [{
    One entry per tensor dimension listing the mesh axes the dimension is
    split over (major to minor), plus the axes over which the value is a
    pending partial sum:

    ```
    #tp.sharding<@m, [[], ["tp"]]>                  column split
    #tp.sharding<@m, [[], []], partial = ["tp"]>    partial sum over tp
    #tp.sharding<@m, [[], ["tp"]], sections = [1, 3]>
    ```

    `sections` views a dimension of size S as k consecutive sections of size
    S/k and splits each section over the axes, so that every rank holds its
    chunk of each section: Megatron's fused [C, 3C] QKV weight is split so,
    each rank owning whole heads of q, k and v.

    An axis appears at most once in a sharding. That the mesh and its axes
    exist and that every split dimension divides is checked where the
    attribute is attached, since only there are the mesh and shape known.
    It is attached as `tp.sharding`: on a function argument or result, and
    on an op with one result, for that result. A value without one is
    replicated. After tp-partition an argument's sharding still describes
    the global tensor, whose shape `tp.global_shape` records.

    Example:

    ```mlir
    tp.mesh @m axes = ["tp" = 2]
    func.func @mlp(%x: tensor<8x64xf32>,
                   %w1: tensor<64x256xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
                   %w2: tensor<256x64xf32> {tp.sharding = #tp.sharding<@m, [["tp"], []]>},
                   %qkv_w: tensor<64x192xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]], sections = [1, 3]>})
        -> tensor<8x64xf32> {
      %h = tp.matmul %x, %w1 {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>} : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
      %y = tp.matmul %h, %w2 {tp.sharding = #tp.sharding<@m, [[], []], partial = ["tp"]>} : tensor<8x256xf32>, tensor<256x64xf32> -> tensor<8x64xf32>
      %z = tp.g %y over @m["tp"] {tp.sharding = #tp.sharding<@m, [[], []]>} : tensor<8x64xf32>
      return %z : tensor<8x64xf32>
    }
    ```
  }];
  let parameters = (ins "FlatSymbolRefAttr":$mesh, "ArrayAttr":$dims,
                        OptionalParameter<"ArrayAttr">:$partial,
                        OptionalArrayRefParameter<"int64_t">:$sections);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Mesh axes dimension `dim` is split over.
    ::llvm::SmallVector<::llvm::StringRef> getDimAxes(unsigned dim) const;
    /// Mesh axes of a pending partial sum.
    ::llvm::SmallVector<::llvm::StringRef> getPartialAxes() const;
    /// Sections of dimension `dim` (1 when not given).
    int64_t getDimSections(unsigned dim) const;
    bool isReplicated() const;
    /// Whether any dimension is split over, or any partial sum pending on,
    /// `axis`.
    bool usesAxis(::llvm::StringRef axis) const;
  }];
}

def TP_InitKind : I32EnumAttr<"InitKind", "parameter initialisation rule",
    [I32EnumAttrCase<"normal", 0>, I32EnumAttrCase<"constant", 1>]> {
  let cppNamespace = "::mlir::tp";
}

def TP_InitAttr : AttrDef<TP_Dialect, "Init"> {
  let mnemonic = "init";
  let summary = "How a parameter is initialised when no checkpoint gives it";
  let description = [{
    The rule a model states for a parameter, written by its generator as the
    `tp.init` argument attribute and carried to the runtime by the step
    manifest:

    ```
    #tp.init<normal, 2.000000e-02>    every element drawn from normal(0, std)
    #tp.init<constant, 1.000000e+00>  every element the constant
    ```

    A depth-scaled rule (GPT-2's residual projections, 0.02 / sqrt(2 L)) is
    a normal rule whose std the generator computed from the depth. The value
    must be finite, and a normal rule's std non-negative.

    Example:

    ```mlir
    func.func @gpt2(%wte: tensor<512x64xf32> {tp.name = "wte.weight", tp.init = #tp.init<normal, 2.000000e-02>},
                    %ln_w: tensor<64xf32> {tp.name = "ln_f.weight", tp.init = #tp.init<constant, 1.000000e+00>}) {
      return
    }
    ```
  }];
  let parameters = (ins "::mlir::tp::InitKind":$kind,
                        APFloatParameter<"std or constant">:$value);
  let builders = [
    AttrBuilder<(ins "::mlir::tp::InitKind":$kind, "double":$value), [{
      return $_get($_ctxt, kind, ::llvm::APFloat(value));
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def TP_LayerAttr : AttrDef<TP_Dialect, "Layer"> {
  let mnemonic = "layer";
  let summary = "The repeated layer of the model a parameter or op belongs to";
  let description = [{
    `tp.layer = #tp.layer<3>` on a parameter, and `loc(fused<#tp.layer<3>>[...])`
    on the ops of that layer: reports and pictures group by it, whatever the
    model names its modules. The index is non-negative.

    Example:

    ```mlir
    func.func @block(%x: tensor<8x64xf32>,
                     %w: tensor<64x256xf32> {tp.name = "h.3.mlp.c_fc.weight", tp.layer = #tp.layer<3>})
        -> tensor<8x256xf32> {
      %h = tp.matmul %x, %w : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32> loc(fused<#tp.layer<3>>["h.3.mlp.c_fc"])
      return %h : tensor<8x256xf32>
    }
    ```
  }];
  let parameters = (ins "int64_t":$index);
  let assemblyFormat = "`<` $index `>`";
  let genVerifyDecl = 1;
}

#endif // MEGATRON_DIALECT_TP_IR_TPATTRS_TD
