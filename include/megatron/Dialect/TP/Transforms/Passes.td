//===- Passes.td - planning and training passes ------------*- tablegen -*-===//
#ifndef MEGATRON_DIALECT_TP_TRANSFORMS_PASSES_TD
#define MEGATRON_DIALECT_TP_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MegatronAnnotate : Pass<"tp-megatron-annotate", "ModuleOp"> {
  let summary = "Shard a transformer's parameters as Megatron-LM does";
  let description = [{
    Creates `tp.mesh @mesh axes = ["tp" = N]` and gives every parameter
    (function argument) Megatron's sharding, recognised from how it is used:
    the weight and bias of a GEMM feeding a region op (declaring
    MegatronRegionOpInterface: attention, GELU, SwiGLU, rotary embeddings)
    are split by columns, a fused QKV per q/k/v section; the weight of a
    GEMM consuming a region op's output is split by rows; the token
    embedding table by vocabulary rows, and the weight of the LM head (the
    GEMM whose result feeds the loss or the logits output) by vocabulary,
    tied to the embedding or not. Everything else (norms, row-parallel
    biases, the position embedding) is replicated. A vocabulary that N does
    not divide is padded to a multiple of 128 * N, as Megatron does; the
    padded logits never reach the loss.
    Parameters that already carry a tp.sharding are left as the user set them.
    With dp > 1 the mesh gains a leading "dp" axis and the batch (dimension
    0) of the tokens and targets is split over it; with micro-batches K > 1
    an "mb" axis of size K follows "dp" and splits each dp rank's rows again,
    so the program is planned and differentiated as if the micro-batches
    were ranks (tp-micro-batches then runs them one after another). A batch
    that dp x K does not divide is an error naming the numbers.
    Apart from the padding, the body is left to tp-propagate and
    tp-insert-conjugates.

    Example:

    ```mlir
    // Before:
    func.func @mlp(%x: tensor<8x64xf32>, %w1: tensor<64x256xf32> {tp.name = "fc.weight"},
                   %w2: tensor<256x64xf32> {tp.name = "proj.weight"}) -> tensor<8x64xf32> {
      %h = tp.matmul %x, %w1 : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
      %a = tp.gelu %h : tensor<8x256xf32>
      %y = tp.matmul %a, %w2 : tensor<8x256xf32>, tensor<256x64xf32> -> tensor<8x64xf32>
      return %y : tensor<8x64xf32>
    }

    // After -tp-megatron-annotate=tp=2: MLP up by columns, MLP down by rows.
    tp.mesh @mesh axes = ["tp" = 2]
    func.func @mlp(%x: tensor<8x64xf32> {tp.sharding = #tp.sharding<@mesh, [[], []]>},
                   %w1: tensor<64x256xf32> {tp.name = "fc.weight", tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>},
                   %w2: tensor<256x64xf32> {tp.name = "proj.weight", tp.sharding = #tp.sharding<@mesh, [["tp"], []]>})
        -> tensor<8x64xf32> {
      // (body unchanged)
    }
    ```
  }];
  let options = [
    Option<"tp", "tp", "int64_t", "1", "tensor-parallel size">,
    Option<"dp", "dp", "int64_t", "1",
           "data-parallel size: the batch of the tokens and targets is split "
           "over a \"dp\" axis">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "micro-batches per step: each dp rank's rows are split again over "
           "an \"mb\" axis, which tp-micro-batches later runs as a loop">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "split the residual stream's sequence over \"tp\" (the input "
           "of every norm), so that propagation finds Megatron's sequence "
           "parallelism">,
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
    that disagree are an error. All annotations must name one mesh.

    Example:

    ```mlir
    // Before: only the first weight is annotated.
    tp.mesh @mesh axes = ["tp" = 2]
    func.func @mlp(%x: tensor<8x64xf32>,
                   %w1: tensor<64x256xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>},
                   %w2: tensor<256x64xf32>) -> tensor<8x64xf32> {
      %h = tp.matmul %x, %w1 : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
      %a = tp.gelu %h : tensor<8x256xf32>
      %y = tp.matmul %a, %w2 : tensor<8x256xf32>, tensor<256x64xf32> -> tensor<8x64xf32>
      return %y : tensor<8x64xf32>
    }

    // After -tp-propagate: %w2 is inferred row-split, and the second GEMM's
    // result a partial sum (Megatron's one-all-reduce MLP).
    func.func @mlp(%x: tensor<8x64xf32> {tp.sharding = #tp.sharding<@mesh, [[], []]>},
                   %w1: tensor<64x256xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>},
                   %w2: tensor<256x64xf32> {tp.sharding = #tp.sharding<@mesh, [["tp"], []]>}) -> tensor<8x64xf32> {
      %h = tp.matmul %x, %w1 {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>} : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
      %a = tp.gelu %h {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>} : tensor<8x256xf32>
      %y = tp.matmul %a, %w2 {tp.sharding = #tp.sharding<@mesh, [[], []], partial = ["tp"]>} : tensor<8x256xf32>, tensor<256x64xf32> -> tensor<8x64xf32>
      return %y : tensor<8x64xf32>
    }
    ```
  }];
}

def InsertConjugates : Pass<"tp-insert-conjugates", "ModuleOp"> {
  let summary = "Insert Megatron's f and g where shardings change";
  let description = [{
    `tp.g` (all-reduce forward, identity backward) where a partial sum meets
    an op that needs it whole; `tp.f` (identity forward, all-reduce backward)
    where a replicated float value enters an op whose results are split or
    partial over an axis, one right after the value that all its uses share
    (so its backward all-reduce sums their gradients once: Llama's q, k and
    v projections of one activation cost one); `tp.reshard` where a value's
    layout differs from what its consumer needs. Axes of size 1 need
    nothing. Runs after tp-propagate, on the global program.

    An f moves up from a value to the operands of the op that made it where
    those operands are whole over its axes (the op's VJP is then the same
    linear map on every rank, so the sum may come before it or after) and
    the elements it then reduces are fewer than the value's: a parameter
    gains an f, an operand with an f of its own has it take the axes on
    (saving a collective where another use already has an f over the
    union), any other operand passes the f on in turn. A position table's f
    stays on the rows a step reads. Grouped-query attention with more ranks
    than key/value heads needs one: the ranks sharing a key/value head ("tp_rep") each read it
    for their own query heads, so its gradient is partial over them. The f
    goes through the rotary embedding and the key projection to the
    projection's weight, whose gradient is reduced over those ranks once
    per step, and to the normalised activation, whose f over "tp_kv" grows
    into the f over "tp" the query projection already puts there.

    Example:

    ```mlir
    // After -tp-propagate -tp-insert-conjugates on the MLP of tp-propagate's
    // example (argument attributes as there):
    %xf = tp.f %x over @mesh["tp"] {tp.sharding = #tp.sharding<@mesh, [[], []]>} : tensor<8x64xf32>
    %h = tp.matmul %xf, %w1 {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>} : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
    %a = tp.gelu %h {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>} : tensor<8x256xf32>
    %y = tp.matmul %a, %w2 {tp.sharding = #tp.sharding<@mesh, [[], []], partial = ["tp"]>} : tensor<8x256xf32>, tensor<256x64xf32> -> tensor<8x64xf32>
    %z = tp.g %y over @mesh["tp"] {tp.sharding = #tp.sharding<@mesh, [[], []]>} : tensor<8x64xf32>
    return %z : tensor<8x64xf32>
    ```
  }];
}

def FunctionEntry : Pass<"tp-function-entry", "ModuleOp"> {
  let summary = "Make a framework's function the step's entry, its results written into outputs";
  let description = [{
    For a program a framework lowered (linalg on tensors, its shardings on
    the arguments): function `entry` becomes the step library's only entry
    (`tp.entry = "function"`). Its arguments, by position, are the inputs
    `arg0`, `arg1`, ... (role "input"); each result is written into a new
    output argument `result0`, ... (role "output") and returned marked
    `tp.updates`, so that the runtime allocates every tensor it reads back.
    Runs on the global program before tp-propagate, which lays each output
    out as the value written into it. Arguments and results must be f32
    tensors of static shape.

    Example:

    ```mlir
    // After -tp-function-entry:
    func.func @main(%arg0: tensor<4x8xf32> {tp.name = "arg0", tp.role = "input"},
                    %arg1: tensor<4x8xf32> {tp.name = "result0", tp.role = "output"})
        -> (tensor<4x8xf32> {tp.updates = 1 : i64}) attributes {tp.entry = "function"} {
      %0 = bufferization.materialize_in_destination %arg0 in %arg1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    }
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", "\"main\"",
           "the function the library exports">,
  ];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def ImportShard : Pass<"tp-import-shard", "ModuleOp"> {
  let summary = "Read upstream shard annotations as tp shardings";
  let description = [{
    A framework that states its shardings the way upstream's
    sharding-propagation reads them (`shard.grid`, `shard.sharding`,
    `shard.shard`) gets the tp planner with no change to its IR: each grid
    becomes a `tp.mesh` of the same name (a 1-d grid's axis is "tp"; a 2-d
    grid's are "dp" and "tp"), each `shard.shard` of a function argument or
    of an op's one result becomes that value's `tp.sharding`, and one
    annotated for its users (or of another value) a `tp.reshard` that gives
    them the layout. Halos and uneven shards, which tp shardings do not
    express, are errors at the sharding; shard ops other than these three
    are left for verifyGlobalProgram to name.

    Example:

    ```mlir
    // Before:
    shard.grid @grid(shape = 2)
    func.func @f(%a: tensor<16x64xf32>) -> tensor<16x64xf32> {
      %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
      %a_s = shard.shard %a to %s : tensor<16x64xf32>
      return %a_s : tensor<16x64xf32>
    }
    // After:
    tp.mesh @grid axes = ["tp" = 2]
    func.func @f(%a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@grid, [[], ["tp"]]>}) -> tensor<16x64xf32> {
      return %a : tensor<16x64xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::tp::TPDialect"];
}

def ExportLogits : Pass<"tp-export-logits", "ModuleOp"> {
  let summary = "Also write the loss's logits into a `logits` argument";
  let description = [{
    For checking a compiled model against a reference: the logits entering
    the cross-entropy are written into a new argument named `logits` (role
    "logits"), laid out as the logits are (split by vocabulary under
    Megatron's plan), and returned as an extra result marked `tp.updates`;
    with a padded vocabulary `tp.unpadded_shape` records the real columns.
    Runs on the global program after tp-insert-conjugates, so tp-partition
    gives the argument its per-rank shape.

    Example:

    ```mlir
    // After -tp-export-logits, on a tied LM head over a vocabulary of 256:
    func.func @lm(%wte: tensor<256x8xf32> {tp.name = "wte", tp.sharding = #tp.sharding<@mesh, [["tp"], []]>},
                  %ids: tensor<2x4xi32> {tp.role = "tokens", tp.sharding = #tp.sharding<@mesh, [[], []]>},
                  %t: tensor<2x4xi32> {tp.role = "targets", tp.sharding = #tp.sharding<@mesh, [[], []]>},
                  %out: tensor<2x4x256xf32> {tp.name = "logits", tp.role = "logits", tp.sharding = #tp.sharding<@mesh, [[], [], ["tp"]]>})
        -> (tensor<f32>, tensor<2x4x256xf32> {tp.updates = 3 : i64}) {
      // ... the embedding, g and f ...
      %l = tp.matmul %xf, %wte {tp.sharding = #tp.sharding<@mesh, [[], [], ["tp"]]>, transpose_rhs} : tensor<2x4x8xf32>, tensor<256x8xf32> -> tensor<2x4x256xf32>
      %loss = tp.cross_entropy %l, %t valid_vocab = 256 {tp.sharding = #tp.sharding<@mesh, []>} : tensor<2x4x256xf32>, tensor<2x4xi32> -> tensor<f32>
      %w = bufferization.materialize_in_destination %l in %out {tp.sharding = #tp.sharding<@mesh, [[], [], ["tp"]]>} : (tensor<2x4x256xf32>, tensor<2x4x256xf32>) -> tensor<2x4x256xf32>
      return %loss, %w : tensor<f32>, tensor<2x4x256xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def Partition : Pass<"tp-partition", "ModuleOp"> {
  let summary = "Rewrite the global program into the per-rank SPMD program";
  let description = [{
    Every value takes this rank's local shape; function arguments keep their
    tp.sharding and gain tp.global_shape, and the function is marked
    `tp.partitioned`. Attention keeps num_heads / N heads; a vocabulary-split
    embedding masks ids outside its rows (offset from tp.axis_index); the
    cross-entropy becomes the vocabulary-parallel pieces, with all-reduces of
    the max, the target logit and the sum of exponentials when the
    vocabulary is split (so training has one gradient rule). tp.reshard
    becomes local slices or all-gathers. The rank is a runtime value, so one
    program serves all.

    Example:

    ```mlir
    // After -tp-partition on tp-insert-conjugates' MLP, N = 2:
    func.func @mlp(%x: tensor<8x64xf32> {tp.global_shape = array<i64: 8, 64>, tp.sharding = #tp.sharding<@mesh, [[], []]>},
                   %w1: tensor<64x128xf32> {tp.global_shape = array<i64: 64, 256>, tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>},
                   %w2: tensor<128x64xf32> {tp.global_shape = array<i64: 256, 64>, tp.sharding = #tp.sharding<@mesh, [["tp"], []]>})
        -> tensor<8x64xf32> attributes {tp.partitioned} {
      %xf = tp.f %x over @mesh["tp"] : tensor<8x64xf32>
      %h = tp.matmul %xf, %w1 : tensor<8x64xf32>, tensor<64x128xf32> -> tensor<8x128xf32>
      %a = tp.gelu %h : tensor<8x128xf32>
      %y = tp.matmul %a, %w2 : tensor<8x128xf32>, tensor<128x64xf32> -> tensor<8x64xf32>
      %z = tp.g %y over @mesh["tp"] : tensor<8x64xf32>
      return %z : tensor<8x64xf32>
    }

    // A vocabulary-split cross-entropy over 2 x 128 columns becomes:
    %rank = tp.axis_index @mesh["tp"]
    %c128 = arith.constant 128 : index
    %start = arith.muli %rank, %c128 : index
    %lmax = tp.xent_max %l offset %start valid_vocab = 256 : tensor<2x4x128xf32> -> tensor<2x4xf32>
    %max = tp.all_reduce max %lmax over @mesh["tp"] : tensor<2x4xf32>
    %se, %tl = tp.xent_sum_exp %l, %max, %t offset %start valid_vocab = 256 : tensor<2x4x128xf32>, tensor<2x4xi32> -> tensor<2x4xf32>
    %sum_exp = tp.all_reduce sum %se over @mesh["tp"] : tensor<2x4xf32>
    %target = tp.all_reduce sum %tl over @mesh["tp"] : tensor<2x4xf32>
    %loss = tp.xent_loss %sum_exp, %max, %target : tensor<2x4xf32> -> tensor<f32>
    ```
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
    `tp.entry = "train_step"`. A function that already has a `tp.entry` is
    an error.

    Example:

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
    backward pass carry `tp.phase = "backward"`, so reports tell the two
    passes apart. The gradient of f is an all-reduce and that of g the
    identity, so replicated parameters get complete, identical gradients on
    every rank and the tied embedding's gradient sums its two uses.

    Example:

    ```mlir
    // Before:
    func.func @step(%x: tensor<4x16xf32>, %w: tensor<16x8xf32> {tp.name = "w"},
                    %t: tensor<4xi32> {tp.role = "targets"}) -> tensor<f32> {
      %y = tp.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
      %c0 = arith.constant 0 : index
      %max = tp.xent_max %y offset %c0 valid_vocab = 8 : tensor<4x8xf32> -> tensor<4xf32>
      %se, %tl = tp.xent_sum_exp %y, %max, %t offset %c0 valid_vocab = 8 : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
      %loss = tp.xent_loss %se, %max, %tl : tensor<4xf32> -> tensor<f32>
      return %loss : tensor<f32>
    }

    // After -tp-autodiff: the loss and the gradient of "w".
    func.func @step(%x: tensor<4x16xf32>, %w: tensor<16x8xf32> {tp.name = "w"},
                    %t: tensor<4xi32> {tp.role = "targets"})
        -> (tensor<f32>, tensor<16x8xf32> {tp.grad_of = "w"}) {
      // ... the forward ops as before ...
      %seed = arith.constant {tp.phase = "backward"} dense<1.000000e+00> : tensor<f32>
      %dy = tp.xent_grad %y, %max, %se, %t, %seed offset %c0 valid_vocab = 8 {tp.phase = "backward"} : tensor<4x8xf32>, tensor<4xf32>, tensor<4xi32>, tensor<f32>
      %dx = tp.matmul %dy, %w {tp.phase = "backward", transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
      %dw = tp.weight_grad %x, %dy {tp.phase = "backward"} : tensor<4x16xf32>, tensor<4x8xf32> -> tensor<16x8xf32>
      return %loss, %dw : tensor<f32>, tensor<16x8xf32>
    }
    ```
  }];
}

def RecomputeLayers : Pass<"tp-recompute-layers", "ModuleOp"> {
  let summary = "Keep each layer's input for the backward pass and recompute the rest (activation checkpointing)";
  let description = [{
    Runs after tp-autodiff on the training step (not on a kept forward
    entry). For every `#tp.layer`, the forward ops whose values the layer's
    backward pass reads, and the forward ops of the layer they are computed
    from, are copied again just before the layer's first backward op, marked
    `tp.phase = "recompute"`; every use from there on reads the copies. The
    originals then die at the end of the layer's forward pass, so the step
    keeps one input per layer (the previous layer's output, which the
    copies read) instead of every activation: Megatron-LM's full-layer
    recomputation (`--recompute-granularity=full`), which trades one more
    forward pass of compute, and of its tensor-parallel all-reduces, for
    the memory that bounds batch and depth. Ops the backward pass does not
    need (a layer's last GEMM when only its sum is read) are not copied.
    The step computes the same values: the copies run the same kernels on
    the same inputs.

    Example:

    ```mlir
    // Before: the backward op reads the layer's GEMM result %h.
    %h = tp.matmul %x, %w : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32> loc(#l0)
    %a = tp.gelu %h : tensor<4x16xf32> loc(#l0)
    ...
    %d = tp.gelu_grad %h, %da {tp.phase = "backward"} : tensor<4x16xf32> loc(#l0)
    // After -tp-recompute-layers: %h is computed again for it.
    %h = tp.matmul %x, %w : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32> loc(#l0)
    %a = tp.gelu %h : tensor<4x16xf32> loc(#l0)
    ...
    %h2 = tp.matmul %x, %w {tp.phase = "recompute"} : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32> loc(#l0)
    %d = tp.gelu_grad %h2, %da {tp.phase = "backward"} : tensor<4x16xf32> loc(#l0)
    ```

    With `selective`, only ops with the `SelectiveRecompute` trait (norms
    and elementwise ops) are copied, and only from operands the step keeps
    anyway: the results of GEMMs, attention and collectives stay alive for
    the backward pass, which then replays none of them, and the norms' and
    activations' outputs die at the end of the forward pass. The attention
    core (scores, softmax and their dropout) is recomputed by the attention
    kernels themselves under every mode, as in Megatron's selective
    recomputation.
  }];
  let options = [
    Option<"selective", "selective", "bool", "false",
           "recompute only norms and elementwise ops (Megatron-Core's "
           "selective recomputation of cheap modules), keeping what GEMMs, "
           "attention and collectives compute">,
  ];
}

def MicroBatches : Pass<"tp-micro-batches", "ModuleOp"> {
  let summary = "Run the micro-batches of an \"mb\" mesh axis as a loop: gradient accumulation";
  let description = [{
    Runs after tp-autodiff and before tp-optimizer, on a per-rank program
    whose mesh has the "mb" axis tp-megatron-annotate adds for
    `micro-batches` = K > 1. Planning, partition and autodiff treated the K
    micro-batches as K ranks; this pass runs them one after another on
    one rank. What depends on an argument split over "mb" (the tokens, the
    targets) becomes the body of an `scf.for` over K, which reads rows
    [k*b, (k+1)*b) of each such argument (the argument grows back to its K*b
    rows and loses "mb" from its sharding). A sum over "mb" (the loss's g,
    the gradients' all-reduce) becomes a value the loop carries and adds
    to; f over "mb" is the identity. What reads those sums (the gradients'
    all-reduce over "dp", which thus runs once per step) follows the loop,
    and what depends on neither stays before it. The mesh loses the "mb"
    axis. Any other collective over "mb", a rank index along it, or a
    result of one micro-batch returned is an error at the op.

    Example:

    ```mlir
    // Before (the gradient of one parameter, K = 2):
    tp.mesh @mesh axes = ["mb" = 2, "tp" = 1]
    func.func @step(%w: tensor<8x8xf32> {tp.name = "w"},
                    %ids: tensor<2x4xi32> {tp.sharding = #tp.sharding<@mesh, [["mb"], []]>}) -> tensor<8x8xf32> {
      %g = tp.embedding_grad ... %ids ...
      %total = tp.all_reduce sum %g over @mesh["mb"] : tensor<8x8xf32>
      return %total : tensor<8x8xf32>
    }
    // After:
    tp.mesh @mesh axes = ["tp" = 1]
    func.func @step(%w: tensor<8x8xf32> {tp.name = "w"},
                    %ids: tensor<4x4xi32> {tp.sharding = #tp.sharding<@mesh, [[], []]>}) -> tensor<8x8xf32> {
      %zero = arith.constant dense<0.0> : tensor<8x8xf32>
      %total = scf.for %k = %c0 to %c2 step %c1 iter_args(%sum = %zero) -> (tensor<8x8xf32>) {
        %rows = arith.muli %k, %c2 : index
        %mine = tensor.extract_slice %ids[%rows, 0] [2, 4] [1, 1] : tensor<4x4xi32> to tensor<2x4xi32>
        %g = tp.embedding_grad ... %mine ...
        %next = tp.add %sum, %g : tensor<8x8xf32>
        scf.yield %next : tensor<8x8xf32>
      }
      return %total : tensor<8x8xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def BucketReductions : Pass<"tp-bucket-reductions", "ModuleOp"> {
  let summary = "Group the gradients' reductions over dp into buckets of a given size";
  let description = [{
    Runs after tp-optimizer. Every parameter's gradient is reduced over
    "dp" once, after the backward pass; issued one by one, a step pays a
    collective's latency per parameter. Consecutive `tp.all_reduce sum` ops
    over "dp" of fp32 gradients (`tp.phase = "backward"`) become
    `tp.all_reduce_bucket` ops of at most `bucket-bytes` bytes each (40 MB
    by default, the order of Megatron-LM's buckets), and ZeRO-1's
    `tp.reduce_scatter sum ... dim = 0` ops over "dp" become
    `tp.reduce_scatter_bucket` ops the same way (a bucket holds one kind).
    The reductions that no op reads in between are bucketed in the order
    their gradients are complete (Megatron's reverse parameter order: the
    last layer's first), so that tp-overlap-collectives can start the first
    buckets while the backward pass still runs; the buckets stand before
    the first op that reads one of their results. A gradient larger than
    the limit is a bucket of its own (the plain collective).

    Example:

    ```mlir
    // Before:
    %dw = tp.all_reduce sum %w_grad over @mesh["dp"] {tp.phase = "backward"} : tensor<64x256xf32>
    %db = tp.all_reduce sum %b_grad over @mesh["dp"] {tp.phase = "backward"} : tensor<256xf32>
    // After -tp-bucket-reductions:
    %dw, %db = tp.all_reduce_bucket sum %w_grad, %b_grad over @mesh["dp"] {tp.phase = "backward"} : tensor<64x256xf32>, tensor<256xf32>
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "40000000",
           "the most bytes of gradients one bucket sums">,
  ];
}

def OverlapCollectives : Pass<"tp-overlap-collectives", "ModuleOp"> {
  let summary = "Run all-reduces, reduce-scatters and all-gathers under the compute that does not need them";
  let description = [{
    Runs last on the per-rank program (after tp-mixed-precision, whose
    types it keeps). A blocking all-reduce leaves the rank idle while the
    sum crosses the network, though much of what follows does not read it:
    the weight gradient of a column-parallel GEMM does not read the input
    gradient being all-reduced over "tp" (Megatron-LM overlaps the two), and
    the earlier layers' backward pass does not read the "dp" sums of the
    later layers' gradients. Each `tp.all_reduce`, `tp.g` and
    `tp.all_reduce_bucket` becomes a `tp.all_reduce_start` placed as early
    as its inputs allow and a `tp.wait` placed as late as its first use
    allows; the ops between them run while the sum is in flight. ZeRO-1's
    fp32 reduce-scatters by rows (`tp.reduce_scatter ... dim = 0` and
    `tp.reduce_scatter_bucket`) become a `tp.reduce_scatter_start` and its
    `tp.wait` the same way, and its all-gathers of updated rows
    (`tp.all_gather ... dim = 0`) a `tp.all_gather_start`, which may start
    past the gather's own place, at the end of the run it stood in.

    Neither half moves into a run of ops of another `#tp.layer` and
    `tp.phase` (tp-outline-layers' calls): a layer's tensor-parallel sums
    start and end inside the layer's run, and a data-parallel bucket, which
    belongs to no one layer, starts where the run that completed its last
    gradient ends. An all-reduce with no work to overlap (Megatron's `g`,
    read by the very next op), or of a host scalar (the gradient norm),
    stays blocking. The runtime completes collectives in the order they
    start, which is the same on every rank.

    Example:

    ```mlir
    // Before:
    %dx = tp.matmul %dy, %w {transpose_rhs} : tensor<4x96xf32>, tensor<64x96xf32> -> tensor<4x64xf32>
    %dw = tp.weight_grad %x, %dy : tensor<4x64xf32>, tensor<4x96xf32> -> tensor<64x96xf32>
    %sum = tp.all_reduce sum %dx over @m["tp"] : tensor<4x64xf32>
    %next = tp.gelu %sum : tensor<4x64xf32>
    // After -tp-overlap-collectives:
    %dx = tp.matmul %dy, %w {transpose_rhs} : tensor<4x96xf32>, tensor<64x96xf32> -> tensor<4x64xf32>
    %p = tp.all_reduce_start sum %dx over @m["tp"] : tensor<4x64xf32>
    %dw = tp.weight_grad %x, %dy : tensor<4x64xf32>, tensor<4x96xf32> -> tensor<64x96xf32>
    %sum = tp.wait %p : tensor<4x64xf32>
    %next = tp.gelu %sum : tensor<4x64xf32>
    ```
  }];
  let options = [
    ListOption<"axes", "axes", "std::string",
               "the mesh axes whose all-reduces start early (every axis "
               "when not given); the others stay blocking">,
  ];
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
    gradient is also written into a `<name>.grad` argument. The ops it adds
    carry `tp.phase = "optimizer"`.

    With `zero=1` (ZeRO-1, Megatron's distributed optimizer) the AdamW
    state of a parameter is split over "dp" along dimension 0 (within its
    tp split there, if any) when dp divides it and it has no sections: the
    gradient's all-reduce over dp becomes a reduce-scatter, each rank updates
    its rows of the parameter (`tp.local_slice`) with its rows of the
    state, and the updated rows are all-gathered over dp and written back
    after every update (so that tp-overlap-collectives can run each gather
    under the later updates). The state
    arguments are then a 1/dp share; the others stay whole. The norm sums
    the squares of each group of gradients split over the same axes once,
    all-reduced over those axes, so no gradient counts twice.

    Example:

    ```mlir
    // After -tp-autodiff -tp-optimizer on tp-autodiff's example:
    func.func @step(%x: tensor<4x16xf32>, %w: tensor<16x8xf32> {tp.name = "w"},
                    %t: tensor<4xi32> {tp.role = "targets"},
                    %m: tensor<16x8xf32> {tp.name = "w.exp_avg", tp.param = "w", tp.role = "adam_m"},
                    %v: tensor<16x8xf32> {tp.name = "w.exp_avg_sq", tp.param = "w", tp.role = "adam_v"},
                    %hp: tensor<8xf32> {tp.name = "hyperparameters", tp.role = "hyperparameters"})
        -> (tensor<f32>, tensor<f32>, tensor<16x8xf32> {tp.updates = 1 : i64},
            tensor<16x8xf32> {tp.updates = 3 : i64}, tensor<16x8xf32> {tp.updates = 4 : i64}) {
      // ... forward and backward as before, %dw the gradient of %w ...
      %ss = tp.sum_squares %dw {tp.phase = "optimizer"} : tensor<16x8xf32>
      // ... %norm, the global norm as a tensor<f32>, and %scale, the f32
      // clipping factor from %hp[5] ...
      %w1, %m1, %v1 = tp.adamw %w, %dw, %m, %v, %hp, %scale if %finite {decay, tp.phase = "optimizer"} : tensor<16x8xf32>, tensor<8xf32>
      return %loss, %norm, %w1, %m1, %v1 : tensor<f32>, tensor<f32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>
    }
    ```
  }];
  let options = [
    Option<"exportGrads", "export-grads", "bool", "false",
           "also write every gradient into a <name>.grad argument">,
    Option<"zero", "zero", "int64_t", "0",
           "ZeRO stage: 0 keeps the AdamW state whole on every dp rank, 1 "
           "splits it over dp">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
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

    Example:

    ```mlir
    // After -tp-mixed-precision on tp-partition's MLP (signature unchanged):
    %w1b = tp.convert %w1 : tensor<64x128xf32> -> tensor<64x128xbf16>
    %w2b = tp.convert %w2 : tensor<128x64xf32> -> tensor<128x64xbf16>
    %xf = tp.f %x over @mesh["tp"] : tensor<8x64xf32>
    %xb = tp.convert %xf : tensor<8x64xf32> -> tensor<8x64xbf16>
    %h = tp.matmul %xb, %w1b : tensor<8x64xbf16>, tensor<64x128xbf16> -> tensor<8x128xbf16>
    %a = tp.gelu %h : tensor<8x128xbf16>
    %y = tp.matmul %a, %w2b : tensor<8x128xbf16>, tensor<128x64xbf16> -> tensor<8x64xbf16>
    %zb = tp.g %y over @mesh["tp"] : tensor<8x64xbf16>
    %z = tp.convert %zb : tensor<8x64xbf16> -> tensor<8x64xf32>
    return %z : tensor<8x64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::tp::TPDialect"];
}

def ShardMasterWeights : Pass<"tp-shard-master-weights", "ModuleOp"> {
  let summary = "bf16 parameters whose fp32 master weights are split over dp (ZeRO-1)";
  let description = [{
    Runs after tp-mixed-precision on a training step built with
    tp-optimizer{zero=1}, and gives it Megatron-LM's distributed optimizer
    in bf16: a parameter AdamW updates by its dp rows (a `tp.local_slice`
    over "dp" feeding `tp.adamw`, the new rows `tp.all_gather`ed back) is
    stored in bf16, and its fp32 master weights are those rows alone, in a
    new argument (`tp.role = "master"`, `tp.param` the parameter, named
    `<param>.master`, laid out like the AdamW moments). The forward and
    backward ops read the bf16 parameter itself (its `tp.convert` copy
    goes); AdamW updates the master in place; the bf16 rounding of the new
    rows is what the all-gather writes into the parameter, at half the
    bytes of an fp32 one. Per rank a parameter then costs 2 bytes plus 12/D
    of optimizer state (master and moments) instead of 4 + 8/D. The
    parameter's other entries (the kept forward step) take it in bf16 too.
    A checkpoint keeps the fp32 values: megatron-run saves the gathered
    masters under the parameter's name and loads both from it. Parameters
    updated whole (rows dp does not divide) keep fp32 storage.

    Example:

    ```mlir
    // Before (after -tp-mixed-precision, tp-optimizer{zero=1}, dp = 2):
    %wb = tp.convert %w : tensor<8x4xf32> -> tensor<8x4xbf16>
    ...
    %rows = tp.local_slice %w over @m["dp"] dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
    %new:3 = tp.adamw %rows, %grad, %m, %v, %hp, %scale, %apply : ...
    %all = tp.all_gather %new#0 over @m["dp"] dim = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
    // After -tp-shard-master-weights (%w : tensor<8x4xbf16>, %master :
    // tensor<4x4xf32>, which %new#0 updates, returned like the moments):
    %new:3 = tp.adamw %master, %grad, %m, %v, %hp, %scale, %apply : ...
    %rounded = tp.convert %new#0 : tensor<4x4xf32> -> tensor<4x4xbf16>
    %all = tp.all_gather %rounded over @m["dp"] dim = 0 : tensor<4x4xbf16> -> tensor<8x4xbf16>
    ```
  }];
  let dependentDialects = ["::mlir::tp::TPDialect",
                           "::mlir::bufferization::BufferizationDialect"];
}

def ExpandReshapes : Pass<"megatron-expand-reshapes", "ModuleOp"> {
  let summary = "Fold a framework's reshapes into linalg iteration spaces, one loop per dimension it merged";
  let description = [{
    Framework lowerings merge dimensions around contractions: IREE turns an
    einsum over heads into a matmul of `[width, 3 * heads * head_width]`
    between a collapse_shape and an expand_shape. A split of the heads is
    then a strided split of the merged dimension, which no factor of the
    matmul expresses, and the plan would gather the weight. This pass first
    generalizes named linalg ops, then folds each reshape into the linalg op
    it feeds or that feeds it by expanding the op's iteration space
    (upstream's fold-reshape-by-expansion patterns), so that every dimension
    the framework wrote (q/k/v, heads, head width) is a loop of its own and a
    factor of the op's sharding rule. Between rounds of expansion it
    composes chains of reshapes (a collapse of `[3, heads, head_width]`
    that the next reshape expands differently is one reshape that keeps
    the heads), which the next round folds in turn. Runs before tp-propagate
    on programs compiled with megatron-compile --entry.

    Example:

    ```mlir
    // Before: the heads' weight [8, 2x4] is merged for a matmul.
    %w = tensor.collapse_shape %arg [[0], [1, 2]] : tensor<8x2x4xf32> into tensor<8x8xf32>
    %y = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x8xf32>) outs(%init : tensor<3x8xf32>) -> tensor<3x8xf32>
    // After: one generic over (m, heads, head width, k), reading %arg as it is.
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // MEGATRON_DIALECT_TP_TRANSFORMS_PASSES_TD
