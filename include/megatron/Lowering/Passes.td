//===- Passes.td - buffer and loop lowering ----------------*- tablegen -*-===//
#ifndef MEGATRON_LOWERING_PASSES_TD
#define MEGATRON_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseResidualNorm : Pass<"tp-fuse-residual-norm", "ModuleOp"> {
  let summary = "A residual add and the norm of its sum as one op";
  let description = [{
    Runs on the per-rank program before the lowering. A `tp.layer_norm`
    of `tp.add(x, tp.bias_add(delta, bias))` with a [C] bias, where the
    bias add has no other use and the norm's parameters are defined before
    the add, becomes one `tp.residual_layer_norm` at the add, which yields
    the sum (the residual stream) and the norm; a `tp.rms_norm` of
    `tp.add(x, delta)` whose weight is defined before the add becomes one
    `tp.residual_rms_norm` likewise: every residual connection
    of a pre-norm transformer but the embeddings'. The lowering runs it as
    one pass over memory. Fused at the tp level, before tp-outline-layers,
    the norm that opens a layer stays with the residual add that closes the
    previous one: both belong to the earlier layer's body.

    Example:

    ```mlir
    // Before:
    %y = tp.bias_add %delta, %b : tensor<2x32x64xf32>, tensor<64xf32>
    %sum = tp.add %x, %y : tensor<2x32x64xf32>
    %h = tp.layer_norm %sum, %w, %nb : tensor<2x32x64xf32>, tensor<64xf32>
    // After -tp-fuse-residual-norm:
    %sum, %h = tp.residual_layer_norm %x, %delta, %b, %w, %nb : tensor<2x32x64xf32>, tensor<64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::tp::TPDialect"];
}

def StackLayerArguments : Pass<"tp-stack-layer-arguments", "ModuleOp"> {
  let summary = "One argument per family of per-layer arguments";
  let description = [{
    Runs on the per-rank program after tp-step-manifest, whose manifest
    declares the same families as stacks: the host allocates each as one
    buffer, member after member. Each entry's family (a layer's first
    parameter in every layer, its moments, its master weights) becomes one
    argument `tensor<L x ...>`, which the entry reads through the first
    member's pointer, and each member a `tensor.extract_slice` of it; the
    results that update members become one result updating the stack
    (`tensor.insert_slice`s into it). The entry's manifest positions in
    `tp.step` follow. tp-roll-layers can then index a stack with the
    loop's induction variable. A module without `tp.step` (no manifest)
    keeps its arguments.

    Example:

    ```mlir
    // Before: the same weight of layers 0 and 1.
    func.func @step(%w0: tensor<4xf32> {tp.layer = #tp.layer<0>, ...},
                    %w1: tensor<4xf32> {tp.layer = #tp.layer<1>, ...})
    // After:
    func.func @step(%w: tensor<2x4xf32> {...}) {
      %w0 = tensor.extract_slice %w[0, 0] [1, 4] [1, 1]
          : tensor<2x4xf32> to tensor<4xf32>
      %w1 = tensor.extract_slice %w[1, 0] [1, 4] [1, 1]
          : tensor<2x4xf32> to tensor<4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def OutlineLayers : Pass<"tp-outline-layers", "ModuleOp"> {
  let summary = "Call one function per distinct layer body instead of repeating it";
  let description = [{
    Runs on the per-rank program, after tp-step-manifest and before the
    lowering, so that a step of L layers lowers and compiles each distinct
    layer body once instead of L times: compile time and the library's
    size stay nearly flat in depth (XLA's scanned layer, PyTorch's
    regional compilation).

    In every block, a run is a maximal sequence of consecutive ops located
    in one `#tp.layer` (what model generators write; tp-autodiff's
    gradients keep their op's location). Runs that are the same ops with
    the same attributes and types, reading their inputs in the same
    pattern and leaving the same results to the rest of the program, form
    a group; a group of two or more becomes one private function, named
    after the function, the runs' `tp.phase` and the body's ordinal in that
    phase (`@gpt2_backward_layer0`), and each run a
    `func.call` at its place. The function's arguments are the values the
    run reads from outside it, in the order it first reads them; its
    results are the run's values read after it (the forward layer's
    output and the activations its backward pass saves). Nothing moves
    across a call, so the program computes exactly what it did; a run
    like no other stays in place.

    Example:

    ```mlir
    // Before: two layers of the same body.
    func.func @step(%x: tensor<4x16xf32>, %w0: tensor<16x16xf32>, %w1: tensor<16x16xf32>) -> tensor<4x16xf32> {
      %h0 = tp.matmul %x, %w0 : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32> loc(#l0)
      %a0 = tp.gelu %h0 : tensor<4x16xf32> loc(#l0)
      %h1 = tp.matmul %a0, %w1 : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32> loc(#l1)
      %a1 = tp.gelu %h1 : tensor<4x16xf32> loc(#l1)
      return %a1 : tensor<4x16xf32>
    }
    #l0 = loc(fused<#tp.layer<0>>["h.0"])
    #l1 = loc(fused<#tp.layer<1>>["h.1"])

    // After -tp-outline-layers:
    func.func @step(%x: tensor<4x16xf32>, %w0: tensor<16x16xf32>, %w1: tensor<16x16xf32>) -> tensor<4x16xf32> {
      %a0 = call @step_forward_layer0(%x, %w0) : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
      %a1 = call @step_forward_layer0(%a0, %w1) : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
      return %a1 : tensor<4x16xf32>
    }
    func.func private @step_forward_layer0(%arg0: tensor<4x16xf32>, %arg1: tensor<16x16xf32>) -> tensor<4x16xf32> {
      %0 = tp.matmul %arg0, %arg1 : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
      %1 = tp.gelu %0 : tensor<4x16xf32>
      return %1 : tensor<4x16xf32>
    }
    ```
  }];
}

def RollLayers : Pass<"tp-roll-layers", "ModuleOp"> {
  let summary = "Loop over the layers: consecutive calls of a layer body as one scf.for";
  let description = [{
    Runs after tp-outline-layers and tp-stack-layer-arguments. Outlining
    leaves one call per layer, and the caller still grows with the depth:
    every call passes its layer's arguments and allocates the activations
    it saves. Here consecutive calls of one function whose operands follow
    the layers (a stack's members at slots `start + i * step`, a value the
    previous call returned, or one value for all) become one `scf.for`
    calling a variant of the function that takes whole stacks and the
    slots: it reads its members from them and writes the results the
    program keeps for every layer (saved activations, gradients) into
    stacks the loop carries, and updates in place (parameters, moments)
    into the stack they came from. The caller then has as many calls as
    distinct layer bodies, whatever the depth, as XLA's scan over stacked
    layers. A single call that reads stack members calls such a variant
    too, so that no member is passed as a view the callee would copy.
    tp.sum_squares of every member of a stack reads the stack instead.

    Example:

    ```mlir
    // Before: layers 0 to 2 of the stack %ws, each reading the last's output.
    %w0 = tensor.extract_slice %ws[0, 0] [1, 4] [1, 1] : tensor<3x4xf32> to tensor<4xf32>
    ...
    %y0 = call @body(%x, %w0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %y1 = call @body(%y0, %w1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %y2 = call @body(%y1, %w2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    // After: the outputs in a stack the loop carries, %x in its slot 0;
    // @body_loop reads slot %i of it and of %ws, writes slot %i + 1.
    %first = tensor.insert_slice %x into %empty[0, 0] [1, 4] [1, 1] : tensor<4xf32> into tensor<4x4xf32>
    %ys = scf.for %i = %c0 to %c3 step %c1 iter_args(%s = %first) -> (tensor<4x4xf32>) {
      %next = arith.addi %i, %c1 : index
      %r = func.call @body_loop(%s, %i, %ws, %i, %next)
          : (tensor<4x4xf32>, index, tensor<3x4xf32>, index, index) -> tensor<4x4xf32>
      scf.yield %r : tensor<4x4xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def DeallocAtLastUse : Pass<"megatron-dealloc-at-last-use", "func::FuncOp"> {
  let summary = "Free each buffer right after the last op that reads it";
  let description = [{
    Runs after upstream's buffer deallocation pipeline, which frees a
    block's buffers at the end of the block. The training step is one
    block, so without this pass every buffer it allocates lives until it
    returns and the step's memory is the sum of all of them. Each
    `memref.dealloc` of a buffer allocated in its block moves to right
    after the last op of the block that reads the buffer or a value derived
    from it: any result of an op that reads it (a view, an extracted
    pointer, a started collective's handle that its wait reads), taken
    transitively, so a buffer a runtime call or a collective still uses is
    not freed under it. A buffer a derived value of which leaves the block
    keeps its free where it was.

    Example:

    ```mlir
    // Before:
    %a = memref.alloc() : memref<16xf32>
    func.call @fill(%a) : (memref<16xf32>) -> ()
    %b = memref.alloc() : memref<16xf32>
    func.call @fill(%b) : (memref<16xf32>) -> ()
    memref.dealloc %a : memref<16xf32>
    memref.dealloc %b : memref<16xf32>
    // After: %a is free before %b is allocated, and the cache reuses it.
    %a = memref.alloc() : memref<16xf32>
    func.call @fill(%a) : (memref<16xf32>) -> ()
    memref.dealloc %a : memref<16xf32>
    %b = memref.alloc() : memref<16xf32>
    func.call @fill(%b) : (memref<16xf32>) -> ()
    memref.dealloc %b : memref<16xf32>
    ```
  }];
}

def ElideCopies : Pass<"megatron-elide-copies", "ModuleOp"> {
  let summary = "Compute a buffer that is only copied into a view in that view";
  let description = [{
    Runs after bufferization and megatron-dealloc-at-last-use. A layer
    rolled into a loop (tp-roll-layers) saves its activations and writes
    its gradients into slots of stacks, and the runtime calls that compute
    them write a buffer of their own that bufferization then copies into
    the slot. For `memref.copy %a, %view` where `%a` is a `memref.alloc`
    of the copy's block, read and written only before the copy and freed
    after it, `%a` becomes `%view` (the copy and the free go) when:

    - no op between the allocation and the copy touches `%view`'s buffer,
      or a value computed from it (a view, a started collective's ticket);
    - `%view`'s buffer is not an argument another argument of the function
      may alias: a private function's callers pass views of distinct
      buffers, an entry's caller (the runtime) distinct buffers;
    - every use of `%a` takes `%view`'s layout: linalg ops, copies, casts
      to a compatible type, and collapsed or expanded views of it (rebuilt
      with the strides of the view);
    - the ops computing `%view` (a subview and its indices) can move to
      before the allocation.

    Example:

    ```mlir
    // Before:
    %a = memref.alloc() : memref<4x8xf32>
    linalg.fill ins(%cst : f32) outs(%a : memref<4x8xf32>)
    %slot = memref.subview %stack[%i, 0, 0] [1, 4, 8] [1, 1, 1]
        : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
    memref.copy %a, %slot : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
    memref.dealloc %a : memref<4x8xf32>
    // After:
    %slot = memref.subview %stack[%i, 0, 0] [1, 4, 8] [1, 1, 1]
        : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
    linalg.fill ins(%cst : f32) outs(%slot : memref<4x8xf32, strided<[8, 1], offset: ?>>)
    ```
  }];
}

def PlanBuffers : Pass<"megatron-plan-buffers", "func::FuncOp"> {
  let summary = "Place a function's buffers at fixed offsets of one arena";
  let description = [{
    Runs after megatron-dealloc-at-last-use, when each buffer's free follows
    its last use. Every statically shaped `memref.alloc` of the function's
    entry block that a `memref.dealloc` in the same block frees lives from
    the one to the other; the pass packs those lifetimes into one buffer
    (largest first, each at the lowest 64-byte-aligned offset that no
    buffer alive at the same time overlaps), allocates it once at the top of
    the function and frees it before the return, and replaces each buffer by
    a `memref.view` at its offset.

    The step then calls the allocator once instead of twice per buffer: a
    48-layer GPT-2 step had about a thousand allocations and as many frees,
    each a call the code generator lowers and the step runs, and the arena
    is as large as what is alive at once, not the sum. A buffer that leaves
    the block, is freed elsewhere or has a dynamic shape keeps its own
    allocation.

    Example:

    ```mlir
    // Before: %a is dead before %b is allocated.
    %a = memref.alloc() : memref<16xf32>
    func.call @fill(%a) : (memref<16xf32>) -> ()
    memref.dealloc %a : memref<16xf32>
    %b = memref.alloc() : memref<16xf32>
    func.call @fill(%b) : (memref<16xf32>) -> ()
    memref.dealloc %b : memref<16xf32>
    // After: both at offset 0 of a 64-byte arena.
    %arena = memref.alloc() {alignment = 64 : i64} : memref<64xi8>
    %a = memref.view %arena[%c0][] : memref<64xi8> to memref<16xf32>
    func.call @fill(%a) : (memref<16xf32>) -> ()
    %b = memref.view %arena[%c0][] : memref<64xi8> to memref<16xf32>
    func.call @fill(%b) : (memref<16xf32>) -> ()
    memref.dealloc %arena : memref<64xi8>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def LoopResultsInPlace : Pass<"megatron-loop-results-in-place", "func::FuncOp"> {
  let summary = "A loop result the loop yields unchanged is its initial buffer";
  let description = [{
    Runs after bufferization. A loop over the layers (tp-roll-layers)
    carries each stack it updates in place, and after bufferization yields
    the very buffer it received: the loop's result is its initial buffer.
    Reads of the result then read that buffer, so that
    drop-equivalent-buffer-results sees a step returning its own argument
    (an update in place) instead of a new buffer it would make an output.

    Example:

    ```mlir
    // Before:
    %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%s = %w) -> (memref<4x8xf32>) {
      func.call @update(%s, %i) : (memref<4x8xf32>, index) -> ()
      scf.yield %s : memref<4x8xf32>
    }
    return %r : memref<4x8xf32>
    // After: `return %w`, and %r unused.
    ```
  }];
}

def CopiesToLinalg : Pass<"megatron-copies-to-linalg", "func::FuncOp"> {
  let summary = "Buffer copies as linalg.copy, loops like the step's others";
  let description = [{
    After bufferization, a `memref.copy` of a strided view (a slice, a pad's
    interior) would lower to a call of MLIR's `memrefCopy`, which no runtime
    of ours provides, and on the CUDA target a host memcpy of device memory.
    As `linalg.copy` it becomes a loop on the CPU and a kernel on the GPU.
    A copy of a view onto the same view (a member a loop over the layers
    updated in place, written back) copies nothing and is erased. With
    `host-memory`, a copy between contiguous buffers (a layer's result into
    its slot of a stack) stays `memref.copy`, which lowers to one `memcpy`
    instead of a loop LLVM vectorises and unrolls in every layer body.

    Example:

    ```mlir
    // Before:
    memref.copy %src, %dst : memref<4x8xf32, strided<[16, 1]>> to memref<4x8xf32>
    // After:
    linalg.copy ins(%src : memref<4x8xf32, strided<[16, 1]>>) outs(%dst : memref<4x8xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
  let options = [
    Option<"hostMemory", "host-memory", "bool", "false",
           "buffers are in host memory, where memcpy can copy them">,
  ];
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

    Example:

    ```mlir
    #id = affine_map<(d0, d1) -> (d0, d1)>
    #row = affine_map<(d0, d1) -> (d1)>
    // Before: %h = x + bias is returned and also read by the tanh.
    %h = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x, %b : tensor<6x32xf32>, tensor<32xf32>) outs(%e : tensor<6x32xf32>) {
    ^bb0(%in: f32, %bias: f32, %out: f32):
      %s = arith.addf %in, %bias : f32
      linalg.yield %s : f32
    } -> tensor<6x32xf32>
    %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%h : tensor<6x32xf32>) outs(%e : tensor<6x32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %t = math.tanh %in : f32
      linalg.yield %t : f32
    } -> tensor<6x32xf32>

    // After: %h stays for its other user; the tanh recomputes the sum.
    %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x, %b : tensor<6x32xf32>, tensor<32xf32>) outs(%e : tensor<6x32xf32>) {
    ^bb0(%in: f32, %bias: f32, %out: f32):
      %s = arith.addf %in, %bias : f32
      %t = math.tanh %s : f32
      linalg.yield %t : f32
    } -> tensor<6x32xf32>
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def ApproximateMath : Pass<"megatron-approximate-math"> {
  let summary = "f32 tanh and exp as polynomials, for loops LLVM vectorises";
  let description = [{
    On the host, LLVM lowers `math.tanh` and `math.exp` to a libm call per
    element, which keeps the loop that holds it scalar: the GELU gradient's
    loop spent most of its time in `tanhf`. This pass rewrites every f32
    `math.tanh` and `math.exp` (scalar or vector) as upstream MLIR's
    polynomial approximations, arithmetic only, so the loops around them
    vectorise. f64 and other element types are left as they are.

    Example:

    ```mlir
    %t = math.tanh %x : f32
    // becomes clamps, multiplies and adds, and one division:
    // a rational approximation of tanh, with no call
    ```
  }];
  let dependentDialects = ["arith::ArithDialect", "math::MathDialect",
                           "vector::VectorDialect"];
}

def ParallelHostLoops : Pass<"megatron-parallel-host-loops", "ModuleOp"> {
  let summary = "Run large scf.parallel loops on the runtime's threads";
  let description = [{
    CPU target, after linalg becomes loops (convert-linalg-to-parallel-loops).
    The runtime's kernels and GEMMs run on every OpenMP thread; the loops
    the compiler generates (AdamW's update, a tied embedding's gradient sum,
    the elementwise chains between kernels) ran on one while the others
    waited. Each outermost `scf.parallel` whose bounds are constants and
    whose work (the ops its body runs, nested loops times their trip
    counts, times its own trip count) reaches `min-ops` becomes:

    - a private function `@<parent>_parallel_loop(%captures: !llvm.ptr,
      %begin: i64, %end: i64)` that runs the loop over iterations
      [begin, end) of its first dimension;
    - where the loop was: the values the loop reads from its parent stored
      into a struct (allocated once at the top of the parent; a buffer as
      its LLVM memref descriptor, through an unrealized cast that
      finalize-memref-to-llvm folds, an index as i64), and a call of
      `mrt_parallel_for(@fn, %captures, trips)`
      (megatron_rt/parallel.h), which splits the iterations over the
      OpenMP threads.

    Smaller loops, loops with results (reductions) and loops whose bounds
    are not constants stay where they are.

    Example:

    ```mlir
    // Before:
    scf.parallel (%i, %j) = (%c0, %c0) to (%c768, %c2304) step (%c1, %c1) {
      ... memref.load %g[%i, %j] ... memref.store %p2, %p[%i, %j] ...
    }
    // After:
    llvm.store (the descriptors of %g and %p) into %captures
    %fn = constant @step_parallel_loop : (!llvm.ptr, i64, i64) -> ()
    call @mrt_parallel_for(%fn, %captures, %c768_i64)
    ```
  }];
  let options = [
    Option<"minOps", "min-ops", "int64_t", /*default=*/"65536",
           "the fewest ops a loop must run to be split over threads">,
  ];
  let dependentDialects = ["arith::ArithDialect", "func::FuncDialect",
                           "LLVM::LLVMDialect"];
}

#endif // MEGATRON_LOWERING_PASSES_TD
