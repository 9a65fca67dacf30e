//===- Passes.td - megatron-mlir passes --------------------*- tablegen -*-===//
#ifndef MEGATRON_TRANSFORMS_PASSES_TD
#define MEGATRON_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MegatronAnnotate : Pass<"tp-megatron-annotate", "ModuleOp"> {
  let summary = "Shard a transformer's parameters as Megatron-LM does";
  let description = [{
    Creates `tp.mesh @mesh axes = ["tp" = N]` and gives every parameter
    (function argument) Megatron's sharding, recognised from how it is used:
    the weight and bias of a GEMM feeding attention (QKV) or GELU (MLP up)
    are split by columns, the fused QKV per q/k/v section; the weight of a
    GEMM consuming attention or GELU output is split by rows; the token
    embedding table, shared with the LM head, by vocabulary rows. Everything
    else (layer norms, row-parallel biases, the position embedding) is
    replicated. A vocabulary that N does not divide is padded to a multiple
    of 128 * N, as Megatron does; the padded logits never reach the loss.
    Parameters that already carry a tp.sharding are left as the user set them.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", "1", "tensor-parallel size">,
  ];
  let dependentDialects = ["::mlir::tp::TPDialect"];
}

def Propagate : Pass<"tp-propagate", "ModuleOp"> {
  let summary = "Complete shardings over every value from a few annotations";
  let description = [{
    Propagates `tp.sharding` from annotated function arguments and ops
    (user annotations, kept as given) to every tensor value, through each
    op's sharding rule, forward and backward until nothing changes. Values
    nothing reaches are replicated. Where two shardings disagree on one
    factor of an op, the split one wins over the replicated one (slicing a
    replicated value is free) and a remark says so; two user annotations
    that disagree are an error.
  }];
}

def InsertConjugates : Pass<"tp-insert-conjugates", "ModuleOp"> {
  let summary = "Insert Megatron's f and g where shardings change";
  let description = [{
    `tp.g` (all-reduce forward, identity backward) where a partial sum meets
    an op that needs it whole; `tp.f` (identity forward, all-reduce backward)
    where a replicated float value enters an op whose results are split or
    partial over an axis; `tp.reshard` where a value's layout differs from
    what its consumer needs. Axes of size 1 need nothing.
  }];
}

def ExportLogits : Pass<"tp-export-logits", "ModuleOp"> {
  let summary = "Also write the loss's logits into a `logits` argument";
  let description = [{
    For checking a compiled model against a reference: the logits entering
    the cross-entropy are written into a new argument named `logits`, laid
    out as the logits are (split by vocabulary under Megatron's plan); with a
    padded vocabulary `tp.unpadded_shape` records the real columns. Runs on
    the global program after tp-insert-conjugates, so tp-partition gives the
    argument its per-rank shape.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def Partition : Pass<"tp-partition", "ModuleOp"> {
  let summary = "Rewrite the global program into the per-rank SPMD program";
  let description = [{
    Every value takes this rank's local shape; function arguments keep their
    tp.sharding and gain tp.global_shape. Attention keeps num_heads / N heads;
    a vocabulary-split embedding masks ids outside its rows (offset from
    tp.axis_index); the cross-entropy becomes the vocabulary-parallel pieces,
    with all-reduces of the max, the target logit and the sum of exponentials
    when the vocabulary is split (so training has one gradient rule). tp.reshard becomes local slices or
    all-gathers. The rank is a runtime value, so one program serves all.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def KeepForward : Pass<"tp-keep-forward", "ModuleOp"> {
  let summary = "Keep the forward pass as an entry of its own beside the training step";
  let description = [{
    Runs before tp-autodiff on the per-rank program. Each function with a
    body is copied as `@<name>_forward`, marked `tp.entry = "forward"` (the
    step library's evaluation entry, which tp-autodiff and tp-optimizer
    leave alone), and the function itself is marked
    `tp.entry = "train_step"`.

    ```mlir
    func.func @gpt2(...) -> tensor<f32>
    // becomes
    func.func @gpt2(...) -> tensor<f32> attributes {tp.entry = "train_step"}
    func.func @gpt2_forward(...) -> tensor<f32> attributes {tp.entry = "forward"}
    ```
  }];
}

def Autodiff : Pass<"tp-autodiff", "ModuleOp"> {
  let summary = "Append the backward pass: gradients of the loss for every parameter";
  let description = [{
    Runs on the per-rank program (after tp-partition), on every function
    but a kept forward entry (tp-keep-forward). Walks the forward
    ops in reverse, asking each op's VJPOpInterface for the gradients of its
    operands and summing the contributions to a value. The function then
    returns the loss followed by the gradient of every float argument named
    by tp.name, in argument order; results carry `tp.grad_of`. Ops of the
    backward pass carry `tp.backward`, so reports tell the two passes apart.
    The gradient of f is an all-reduce and that of g the identity, so
    replicated parameters get complete, identical gradients on every rank and
    the tied embedding's gradient sums its two uses.
  }];
}

def Optimizer : Pass<"tp-optimizer", "ModuleOp"> {
  let summary = "Append AdamW with TP-aware global-norm clipping: the train step";
  let description = [{
    Runs after tp-autodiff. Every parameter gains AdamW state arguments
    (`<name>.exp_avg`, `<name>.exp_avg_sq`, sharded like the parameter) and
    the function an `f32[8]` hyperparameters argument
    ([lr, beta1, beta2, eps, weight_decay, grad_clip, step, 0]), so the
    schedule is the runtime's. The global gradient norm counts each
    parameter once: squares of sharded gradients are summed on each rank and
    all-reduced over their axis, those of replicated gradients added after.
    With grad_clip > 0, gradients scale by min(1, grad_clip / (norm + 1e-6))
    as torch.nn.utils.clip_grad_norm_ does. Weight decay applies to 2-D
    weights only. The function returns the loss, the norm, then the updated
    parameters and state, each marked `tp.updates` with the argument it
    replaces so bufferization writes it in place. With `export-grads`, each
    gradient is also written into a `<name>.grad` argument.
  }];
  let options = [
    Option<"exportGrads", "export-grads", "bool", "false",
           "also write every gradient into a <name>.grad argument">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MixedPrecision : Pass<"tp-mixed-precision", "ModuleOp"> {
  let summary = "bf16 activations and parameter copies, fp32 master weights";
  let description = [{
    Runs on the per-rank program (after tp-partition, and after tp-optimizer
    for the training step) and gives it llm.c's mixed precision. Every
    activation, every activation gradient and every parameter a forward or
    backward op reads become bf16: each fp32 parameter is rounded once per
    step by a `tp.convert`, which all its forward and backward uses share.
    What rounding would hurt stays fp32: the cross-entropy's maxima, sums
    and loss, the parameter gradients (GEMMs, bias sums, embedding and
    layer-norm parameter gradients accumulate into fp32), the gradient norm,
    the AdamW update and its moments, and softmax, whose reductions the
    generic lowering would accumulate in the element type. Collectives and
    sums follow their operands. The function signatures do not change: the
    manifest, the checkpoints and megatron-run stay fp32, and a bf16 value
    a function returns is widened back.
  }];
  let dependentDialects = ["::mlir::tp::TPDialect"];
}

def Explain : Pass<"tp-explain", "ModuleOp"> {
  let summary = "Report parameters, FLOPs and communication per rank";
  let description = [{
    Reads a partitioned module and writes a JSON report: tp size,
    params_total, params_per_rank, flops_per_rank_per_step, the
    collectives by kind and direction with their element counts, and the
    local GEMM shapes of each layer. `text=true` prints a summary to stdout.
    With `hardware=`, it adds the step time the performance model predicts
    (include/megatron/Transforms/PerformanceModel.h).
  }];
  let options = [
    Option<"json", "json", "std::string", "\"\"", "write the JSON report to this file ('-' for stdout)">,
    Option<"text", "text", "bool", "false", "print a readable summary to stdout">,
    Option<"hardware", "hardware", "std::string", "\"\"",
           "predict the step time on this hardware: v100-dgx2, h100-sxm, "
           "h200-sxm or a JSON file of measured rates">,
  ];
}

def Predict : Pass<"tp-predict", "ModuleOp"> {
  let summary = "Predict the step time of a global program at several TP sizes";
  let description = [{
    For each TP size, runs the Megatron pipeline (and with `train`, the
    backward pass and optimizer) on a copy of the global program and prints
    the performance model's prediction on `hardware`: step time, its compute,
    memory and communication parts, and the FLOP rate per rank. A size the
    model cannot be split into is reported with the reason. The program
    itself is left unchanged.
  }];
  let options = [
    ListOption<"tpSizes", "tp", "int64_t", "tensor-parallel sizes to predict">,
    Option<"hardware", "hardware", "std::string", "\"h100-sxm\"",
           "v100-dgx2, h100-sxm, h200-sxm or a hardware JSON file">,
    Option<"train", "train", "bool", "true",
           "predict the training step (forward, backward, AdamW)">,
  ];
  // The pipelines it runs create ops of these dialects.
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::tp::TPDialect"];
}

def FuseElementwise : Pass<"megatron-fuse-elementwise"> {
  let summary = "Fuse chains of elementwise linalg ops, shared producers too";
  let description = [{
    Upstream's linalg-fuse-elementwise-ops fuses a producer only into its
    single user. In a training step producers often have two: a bias add
    before GELU (where the GEMM's epilogue does not take it: rows that are
    not a multiple of 8) is also read by GELU's gradient, a parameter's bf16
    copy by several consumers. Here a producer is fused into every
    elementwise (all-parallel) consumer when that does not make the consumer
    read more full-size tensors than it saves (x + bias yes, a residual sum
    of two tensors no, which would re-add the residual stream in every
    block). Reductions are never fused into: they would recompute the
    producer once per reduced row.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def View : Pass<"tp-view", "ModuleOp"> {
  let summary = "Draw one transformer layer as a Graphviz picture";
  let description = [{
    Writes a DOT graph of one layer of a module that has shardings and
    conjugates (after tp-insert-conjugates): ops grouped by block, coloured
    by the sharding of their result, f and g marked.
  }];
  let options = [
    Option<"dot", "dot", "std::string", "\"-\"", "output DOT file">,
    Option<"layer", "layer", "int64_t", "0", "the layer to draw">,
  ];
}

#endif // MEGATRON_TRANSFORMS_PASSES_TD
