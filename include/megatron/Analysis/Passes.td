//===- Passes.td - reports on a plan -----------------------*- tablegen -*-===//
#ifndef MEGATRON_ANALYSIS_PASSES_TD
#define MEGATRON_ANALYSIS_PASSES_TD

include "mlir/Pass/PassBase.td"

def Explain : Pass<"tp-explain", "ModuleOp"> {
  let summary = "Report parameters, FLOPs and communication per rank";
  let description = [{
    Reads a partitioned module and writes a JSON report: tp and dp sizes,
    params_total, params_per_rank, the bytes a rank holds for parameters,
    gradients and optimizer state, flops_per_rank_per_step, the collectives
    by kind, direction and axis with their element counts (and, for those
    tp-overlap-collectives started, how many and the FLOPs of the GEMMs
    that run between their start and their wait), the bytes each mesh axis
    moves, and the local GEMM shapes of each layer. `text=true` prints a summary to stdout.
    With `hardware=`, it adds the step time the performance model predicts
    (include/megatron/Analysis/PerformanceModel.h). The module is left
    unchanged.

    Example:

    ```mlir
    // Input: tp-partition's MLP (global [64, 256] and [256, 64] weights, N = 2),
    // argument attributes as there.
    func.func @mlp(%x: tensor<8x64xf32>, %w1: tensor<64x128xf32>,
                   %w2: tensor<128x64xf32>) -> tensor<8x64xf32> attributes {tp.partitioned} {
      %xf = tp.f %x over @mesh["tp"] : tensor<8x64xf32>
      %h = tp.matmul %xf, %w1 : tensor<8x64xf32>, tensor<64x128xf32> -> tensor<8x128xf32>
      %a = tp.gelu %h : tensor<8x128xf32>
      %y = tp.matmul %a, %w2 : tensor<8x128xf32>, tensor<128x64xf32> -> tensor<8x64xf32>
      %z = tp.g %y over @mesh["tp"] : tensor<8x64xf32>
      return %z : tensor<8x64xf32>
    }
    ```

    `megatron-opt mlp.mlir -tp-explain=text=true -o /dev/null` prints:

    ```
    tensor parallel: tp=2
    parameters: 32768 total, 16384 per rank
    FLOPs per rank per step: 262144 forward, 0 backward
    conjugates: 1 f, 1 g
    communication per rank per step: 512 elements
      all_reduce forward: 1 x 512 elements
    ```
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
    For each data-parallel and tensor-parallel size, runs the Megatron
    pipeline (and with `train`, the backward pass, optimizer and gradient
    buckets, and with `overlap`, tp-overlap-collectives on those axes) on a
    copy of the global program and prints the performance model's
    prediction on `hardware`: step time, its compute, memory and
    communication parts, and the FLOP rate per rank. The model follows the
    started collectives' schedule as the runtime runs it: one in-order
    queue of collectives beside the rank's compute, a wait holding the
    compute until its collective is done. Ranks are placed in
    nodes as megatron-run numbers them (tp neighbours): a collective whose
    group spans nodes uses its share of the node's network adapters. A size
    the model cannot be split into is reported with the reason. The program
    itself is left unchanged.

    Example:

    ```mlir
    // Input: a global program without shardings, as a model generator writes it.
    func.func @gpt2(%wte: tensor<512x64xf32> {tp.name = "wte.weight", tp.role = "param"}, ...,
                    %ids: tensor<2x32xi32> {tp.name = "input_ids", tp.role = "tokens"},
                    %targets: tensor<2x32xi32> {tp.name = "targets", tp.role = "targets"}) -> tensor<f32> {
      %x = tp.embedding %wte[%ids] : tensor<512x64xf32>, tensor<2x32xi32> -> tensor<2x32x64xf32>
      // ... two layers with 4 attention heads, the LM head and the loss ...
    }
    ```

    On GPT-2's tiny preset, `megatron-opt --tp-predict="tp=1,2,3"` prints:

    ```
    predicted training step on h100-sxm
      tp   dp     step s    compute     memory       comm   TFLOP/s/rank
       1    1     0.0000     0.0000     0.0000     0.0000           43.3
       2    1     0.0001     0.0000     0.0000     0.0001            0.5
       3    1 not possible: tensor-parallel size 3 does not divide the 4 attention heads
    ```
  }];
  let options = [
    ListOption<"tpSizes", "tp", "int64_t", "tensor-parallel sizes to predict">,
    ListOption<"dpSizes", "dp", "int64_t",
               "data-parallel sizes to predict (1 when not given); the "
               "program's batch is the global one, split over dp">,
    Option<"hardware", "hardware", "std::string", "\"h100-sxm\"",
           "v100-dgx2, h100-sxm, h200-sxm or a hardware JSON file">,
    Option<"train", "train", "bool", "true",
           "predict the training step (forward, backward, AdamW)">,
    Option<"recompute", "recompute", "bool", "false",
           "with train, each layer's forward runs again before its backward "
           "(tp-recompute-layers, as megatron-compile --recompute builds); "
           "the FLOP rate counts the model's FLOPs only">,
    ListOption<"overlap", "overlap", "std::string",
               "mesh axes (tp, dp) whose all-reduces run under the compute "
               "that does not need them (tp-overlap-collectives, as "
               "megatron-compile builds by default; dp alone is Megatron-LM's "
               "overlapped gradient reduction); none given: every collective "
               "blocks, as the Megatron-LM paper ran. The step column then "
               "counts only the communication that is not hidden">,
  ];
  // The pipelines it runs create ops of these dialects.
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::tp::TPDialect"];
}

def View : Pass<"tp-view", "ModuleOp"> {
  let summary = "Draw one transformer layer as a Graphviz picture";
  let description = [{
    Writes a DOT graph of one layer of a module that has shardings and
    conjugates (after tp-insert-conjugates): ops grouped by block, coloured
    by the sharding of their result, f and g marked. An op belongs to the
    layer whose `#tp.layer` its location carries; the attention block runs
    up to the residual add after the attention, the MLP block after it. The
    module is left unchanged.

    Example:

    ```mlir
    // Input: ops located in layer 0.
    %xf = tp.f %x over @mesh["tp"] {tp.sharding = #tp.sharding<@mesh, [[], []]>} : tensor<8x16xf32> loc(fused<#tp.layer<0>>["h.0.mlp.c_fc"])
    %h = tp.matmul %xf, %w {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>} : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32> loc(fused<#tp.layer<0>>["h.0.mlp.c_fc"])
    ```

    `-tp-view` writes, among the graph's other lines:

    ```
    n0 [label="tp.f\nh.0.mlp.c_fc\n[8x16]\nreplicated", fillcolor="#93c47d", shape=diamond];
    n1 [label="tp.matmul\nh.0.mlp.c_fc\n[8x64] -> [8x32] per rank\ndim 1 split over [\"tp\"]", fillcolor="#9fc5e8", shape=box];
    n0 -> n1;
    ```
  }];
  let options = [
    Option<"dot", "dot", "std::string", "\"-\"", "output DOT file">,
    Option<"layer", "layer", "int64_t", "0", "the layer to draw">,
  ];
}

#endif // MEGATRON_ANALYSIS_PASSES_TD
