//===- TPAttrs.td - tp attributes and enums ----------------*- tablegen -*-===//
#ifndef MEGATRON_DIALECT_TP_IR_TPATTRS_TD
#define MEGATRON_DIALECT_TP_IR_TPATTRS_TD

include "megatron/Dialect/TP/IR/TPBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def TP_ReductionKind : I32EnumAttr<"ReductionKind", "collective reduction",
    [I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>]> {
  let cppNamespace = "::mlir::tp";
}

def TP_ShardingAttr : AttrDef<TP_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "How a tensor is laid out over a tp.mesh";
  let description = [{
    One entry per tensor dimension listing the mesh axes the dimension is
    split over (major to minor), plus the axes over which the value is a
    pending partial sum:

      #tp.sharding<@m, [[], ["tp"]]>                  column split
      #tp.sharding<@m, [[], []], partial = ["tp"]>    partial sum over tp
      #tp.sharding<@m, [[], ["tp"]], sections = [1, 3]>

    `sections` views a dimension of size S as k consecutive sections of size
    S/k and splits each section over the axes, so that every rank holds its
    chunk of each section: Megatron's fused [C, 3C] QKV weight is split so,
    each rank owning whole heads of q, k and v.

    An axis appears at most once in a sharding. That the mesh and its axes
    exist and that every split dimension divides is checked where the
    attribute is attached, since only there are the mesh and shape known.
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

#endif // MEGATRON_DIALECT_TP_IR_TPATTRS_TD
