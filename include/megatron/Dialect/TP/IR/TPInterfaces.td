//===- TPInterfaces.td - tp op interfaces ------------------*- tablegen -*-===//
#ifndef MEGATRON_DIALECT_TP_IR_TPINTERFACES_TD
#define MEGATRON_DIALECT_TP_IR_TPINTERFACES_TD

include "mlir/IR/OpBase.td"

def TP_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::tp";
  let description = [{
    Ops that say how their dimensions may be split across a mesh. Sharding
    propagation, conjugate insertion and the explain report all read the
    same rule, so an op's parallel semantics live in one place.
  }];
  let methods = [
    InterfaceMethod<"The op's factors and how they index its tensors.",
                    "::mlir::tp::ShardingRule", "getShardingRule">,
  ];
}

#endif // MEGATRON_DIALECT_TP_IR_TPINTERFACES_TD
