//===- Passes.td - the step library ------------------------*- tablegen -*-===//
#ifndef MEGATRON_TARGET_PASSES_TD
#define MEGATRON_TARGET_PASSES_TD

include "mlir/Pass/PassBase.td"

def StepManifest : Pass<"tp-step-manifest", "ModuleOp"> {
  let summary = "Record the step library's manifest and entry points on the module";
  let description = [{
    Runs on the per-rank tp program, after the training step is built and
    before the lowering. Builds the JSON manifest of the step (the contract
    megatron-run reads: every argument's name, role, dtype, shapes, split and
    memory, the target and the entry points) and records it with the
    entries, each the function it wraps and where its arguments sit in the
    manifest, as the module attribute `tp.step`, which the lowering keeps.

    The entries are the functions marked `tp.entry` (tp-keep-forward, or
    generation's prefill and decode, which need `generate`), or the module's
    one function with a body as the forward entry.

    Example:

    ```mlir
    module attributes {tp.step = {
        entries = [{arguments = array<i32: 0, 1, 2>, function = "step_forward", kind = "forward"},
                   {arguments = array<i32: 0, 1, 2, 3>, function = "step", kind = "train_step"} ],
        manifest = "{...}", target = "cpu"}} {
      func.func @step(...) -> tensor<f32> attributes {tp.entry = "train_step"}
      func.func @step_forward(...) -> tensor<f32> attributes {tp.entry = "forward"}
    }
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "where the step runs: cpu, cuda or cuda-on-host">,
    Option<"generate", "generate", "bool", "false",
           "the module is a generation program: its entries are prefill and "
           "decode (and a module with those entries needs this option)">,
  ];
}

#endif // MEGATRON_TARGET_PASSES_TD
