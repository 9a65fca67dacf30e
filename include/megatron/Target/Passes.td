//===- Passes.td - megatron-mlir target passes -------------*- tablegen -*-===//
#ifndef MEGATRON_TARGET_PASSES
#define MEGATRON_TARGET_PASSES

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

#endif // MEGATRON_TARGET_PASSES
