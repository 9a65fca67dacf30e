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

    An axis appears at most once in a sharding. That the mesh and its axes
    exist and that every split dimension divides is checked where the
    attribute is attached, since only there are the mesh and shape known.
  }];
  let parameters = (ins "FlatSymbolRefAttr":$mesh, "ArrayAttr":$dims,
                        OptionalParameter<"ArrayAttr">:$partial);
  let assemblyFormat = "`<` $mesh `,` $dims (`,` `partial` `=` $partial^)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Mesh axes dimension `dim` is split over.
    ::llvm::SmallVector<::llvm::StringRef> getDimAxes(unsigned dim) const;
    /// Mesh axes of a pending partial sum.
    ::llvm::SmallVector<::llvm::StringRef> getPartialAxes() const;
    bool isReplicated() const;
  }];
}

#endif // MEGATRON_DIALECT_TP_IR_TPATTRS_TD
