//===- TPTypes.td - tp dialect types -----------------------*- tablegen -*-===//
#ifndef MEGATRON_DIALECT_TP_IR_TPTYPES_TD
#define MEGATRON_DIALECT_TP_IR_TPTYPES_TD

include "megatron/Dialect/TP/IR/TPBase.td"
include "mlir/IR/AttrTypeBase.td"

def TP_PendingType : TypeDef<TP_Dialect, "Pending"> {
  let mnemonic = "pending";
  let summary = "A collective started and not yet waited for";
  let description = [{
    What `tp.all_reduce_start` returns and `tp.wait` takes: a handle on
    reductions in flight. The reduced tensors exist only as the wait's
    results, so no op can read a sum before it is complete.
  }];
}

#endif // MEGATRON_DIALECT_TP_IR_TPTYPES_TD
