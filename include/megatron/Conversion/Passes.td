//===- Passes.td - megatron-mlir conversions ---------------*- tablegen -*-===//
#ifndef MEGATRON_CONVERSION_PASSES_TD
#define MEGATRON_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertTPToRuntime : Pass<"convert-tp-to-runtime", "ModuleOp"> {
  let summary = "Lower the per-rank tp program to runtime calls and linalg";
  let description = [{
    Runs on the output of tp-partition (and tp-optimizer, tp-mixed-precision
    when they ran). GEMMs, attention, layer norm, embedding, the
    cross-entropy pieces, bias-gradient sums (`tp.sum_to`), the gradient
    norm and collectives become calls into the runtime on buffers
    (`bufferization.to_buffer` of operands, fresh `memref.alloc` results
    wrapped back with `bufferization.to_tensor`), so one-shot bufferization
    sees them. Calls fuse what one kernel can do: a residual add, the
    branch's bias and the next layer norm are one call; a GEMM whose one
    use adds a bias takes the bias, and the sum's GELU, in its epilogue.
    Each call is the `_f32` or `_bf16` variant of its storage type; other
    element types are an error at the op. What is left elementwise (bias
    and residual adds, GELU and its gradient, `tp.convert`, AdamW) becomes
    `linalg.generic` on tensors, computing in fp32 whatever the storage;
    the position embedding and local slices become `tensor.extract_slice`.
    Every function gains a leading `!llvm.ptr` argument, the rank's runtime
    context, returns its scalar loss as `f32`, and becomes private: only the
    entry points generated around it are exported. The functions' `tp`
    attributes and the `tp.mesh` are removed (the manifest is made before
    this lowering); a `tp` op left without a lowering is an error.

    The patterns come in families, one file each under
    lib/Conversion/TPToRuntime, each with its populate function
    (megatron/Conversion/TPToRuntime/TPToRuntime.h); the target's limits
    (RuntimeTargetInfo) come from the options.

    Example:

    ```mlir
    // Before:
    tp.mesh @mesh axes = ["tp" = 2]
    func.func @step(%y: tensor<8x64xf32>) -> tensor<8x64xf32> attributes {tp.partitioned} {
      %z = tp.g %y over @mesh["tp"] : tensor<8x64xf32>
      return %z : tensor<8x64xf32>
    }

    // After -convert-tp-to-runtime: g is an in-place all-reduce of a copy.
    func.func private @step(%ctx: !llvm.ptr, %y: tensor<8x64xf32>) -> tensor<8x64xf32> {
      %in = bufferization.to_buffer %y read_only : tensor<8x64xf32> to memref<8x64xf32>
      %alloc = memref.alloc() : memref<8x64xf32>
      %flat = memref.collapse_shape %alloc [[0, 1]] : memref<8x64xf32> into memref<512xf32>
      %buf = memref.cast %flat : memref<512xf32> to memref<?xf32>
      memref.copy %in, %alloc : memref<8x64xf32> to memref<8x64xf32>
      %tp = arith.constant 1 : i32      // MRT_AXIS_TP
      %n = arith.constant 512 : i64
      %sum = arith.constant 0 : i32     // MRT_REDUCE_SUM
      call @mrt_all_reduce_f32(%ctx, %tp, %buf, %n, %sum) : (!llvm.ptr, i32, memref<?xf32>, i64, i32) -> ()
      %z = bufferization.to_tensor %alloc restrict writable : memref<8x64xf32> to tensor<8x64xf32>
      return %z : tensor<8x64xf32>
    }
    func.func private @mrt_all_reduce_f32(!llvm.ptr, i32, memref<?xf32>, i64, i32)
    ```
  }];
  let options = [
    Option<"geluEpilogueRowMultiple", "gelu-epilogue-row-multiple", "int64_t",
           "8", "a GEMM's epilogue computes GELU only for rows of a multiple "
                "of this many elements (cuBLASLt's GELU_AUX)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::tensor::TensorDialect"
  ];
}

def ConvertTPToShard : Pass<"convert-tp-to-shard", "ModuleOp"> {
  let summary = "Export a program in upstream's shard terms: a plan's collectives, or the shardings to plan from";
  let description = [{
    Each `tp.mesh` becomes a `shard.grid` of the same name and axis order.
    A partitioned function (what megatron-partition-pipeline makes of a
    framework's linalg program) keeps its plan: the framework goes on with
    upstream's own pipeline (convert-shard-to-mpi lowers the all-reduces).
    A function at global shapes keeps its shardings: every `tp.sharding`,
    of an argument or of an op's result, becomes a `shard.shard` of the
    value, which upstream's sharding-propagation and shard-partition plan
    from (for comparing the two plans of the same annotations). Each
    collective becomes upstream's over the grid axis at the position of its
    mesh axis:

    | tp | shard |
    | --- | --- |
    | `f` | its input (the identity forward) |
    | `g`, `all_reduce` | `all_reduce` (sum or max) |
    | `all_reduce_bucket` | one `all_reduce` per tensor |
    | `all_reduce_start` and its `wait` | one `all_reduce` per tensor, where it starts |
    | `all_gather` | `all_gather`, `gather_axis` = `dim` |
    | `reduce_scatter` | `reduce_scatter`, `scatter_axis` = `dim` |
    | `local_slice` | `all_slice`, `slice_axis` = `dim` |
    | `axis_index` | `process_multi_index` of that axis |

    The `tp.*` attributes (shardings, global shapes, names, roles) only
    described the partition and are dropped, so the result holds no tp
    dialect. A tp op that is no collective (the tp dialect's own
    transformer ops, which megatron-compile lowers), a collective at global
    shapes, and a sharding with sections or pending sums (which shard
    annotations cannot state) are errors at them.

    Example:

    ```mlir
    // Before (megatron-partition-pipeline's output):
    tp.mesh @mesh axes = ["tp" = 2]
    func.func @mlp(%h: tensor<8x16xf32>) -> tensor<8x16xf32> attributes {tp.partitioned} {
      %y = tp.g %h over @mesh["tp"] : tensor<8x16xf32>
      return %y : tensor<8x16xf32>
    }

    // After -convert-tp-to-shard:
    shard.grid @mesh(shape = 2)
    func.func @mlp(%h: tensor<8x16xf32>) -> tensor<8x16xf32> {
      %y = shard.all_reduce %h on @mesh grid_axes = [0] : tensor<8x16xf32> -> tensor<8x16xf32>
      return %y : tensor<8x16xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def ConvertShardToTP : Pass<"convert-shard-to-tp", "ModuleOp"> {
  let summary = "Read a program upstream partitioned: shard collectives as tp collectives";
  let description = [{
    The inverse of convert-tp-to-shard, on what upstream's `shard-partition`
    makes: each `shard.grid` becomes the `tp.mesh` of the same name (axes
    "tp", or "dp" and "tp"), each collective over one grid axis the tp
    collective over that mesh axis (`all_reduce` of a sum or a max,
    `all_gather`, `reduce_scatter`, `all_slice` as `local_slice`),
    `process_multi_index` of one axis `tp.axis_index`, and `grid_shape` of
    one axis its constant size; the functions are marked partitioned. Then
    the tools that read per-rank programs read upstream's plan as they read
    ours: `tp-explain` reports what it moves, beside what our plan for the
    same annotations moves.

    A sharding annotation left in the program (tp-import-shard reads those),
    a collective over several grid axes, a reduction other than a sum or a
    maximum, or a shard op without a tp counterpart (halo updates,
    all-to-all, point-to-point) is an error at it.

    Example:

    ```mlir
    // Before (mlir-opt --sharding-propagation --shard-partition):
    shard.grid @grid(shape = 4)
    func.func @mlp(%x: tensor<8x16xf32>) -> tensor<8x64xf32> {
      %y = shard.all_gather %x on @grid grid_axes = [0] gather_axis = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
      return %y : tensor<8x64xf32>
    }

    // After -convert-shard-to-tp:
    tp.mesh @grid axes = ["tp" = 4]
    func.func @mlp(%x: tensor<8x16xf32>) -> tensor<8x64xf32> attributes {tp.partitioned} {
      %y = tp.all_gather %x over @grid["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
      return %y : tensor<8x64xf32>
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::tp::TPDialect"
  ];
}

def FinalizeRuntimeCalls : Pass<"megatron-finalize-runtime-calls", "ModuleOp"> {
  let summary = "Pass buffers to runtime calls as plain C pointers";
  let description = [{
    Runs after bufferization and buffer deallocation, when every runtime
    call's buffers are allocated and freed around it: each `memref<?xT>`
    operand of a call to an external function becomes the `!llvm.ptr` to its
    first element (aligned base plus offset), the C ABI libmegatron_rt
    exports, and the declarations follow.

    Example:

    ```mlir
    // Before:
    call @mrt_all_reduce_f32(%ctx, %tp, %buf, %n, %sum) : (!llvm.ptr, i32, memref<?xf32>, i64, i32) -> ()
    func.func private @mrt_all_reduce_f32(!llvm.ptr, i32, memref<?xf32>, i64, i32)

    // After -megatron-finalize-runtime-calls:
    %base = memref.extract_aligned_pointer_as_index %buf : memref<?xf32> -> index
    %base64 = arith.index_cast %base : index to i64
    %ptr = llvm.inttoptr %base64 : i64 to !llvm.ptr
    %b, %offset, %size, %stride = memref.extract_strided_metadata %buf : memref<?xf32> -> memref<f32>, index, index, index
    %offset64 = arith.index_cast %offset : index to i64
    %first = llvm.getelementptr %ptr[%offset64] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    call @mrt_all_reduce_f32(%ctx, %tp, %first, %n, %sum) : (!llvm.ptr, i32, !llvm.ptr, i64, i32) -> ()
    func.func private @mrt_all_reduce_f32(!llvm.ptr, i32, !llvm.ptr, i64, i32)
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def OffloadToGPU : Pass<"megatron-offload-to-gpu", "ModuleOp"> {
  let summary = "Run the step's loops on the GPU as gpu.launch kernels";
  let description = [{
    The CUDA target's step keeps every buffer in device memory; its host code
    only orders work on the rank's stream. Runs after bufferization,
    megatron-finalize-runtime-calls and megatron-copies-to-linalg: each `linalg` op
    left on the host (the fused elementwise chains, fills, the AdamW
    update) becomes one `gpu.launch`: parallel
    dimensions first, the innermost spread over `block-size` threads of
    `blockIdx.x` blocks (coalesced rows), outer ones over `blockIdx.y/z` (in
    tiles walked by each thread when longer than the grid's 65535), and
    reductions as a loop inside each thread. A function's launches form one
    chain of async tokens from its entry to a wait before it returns, so
    they queue on one stream without host synchronisation between them.
    What would still touch buffer
    elements on the host afterwards is an error located at the op: only the
    step's host arguments (the hyperparameters) may be read there.

    Example:

    ```mlir
    // Before:
    #map = affine_map<(d0) -> (d0)>
    func.func @scale(%p: memref<1024xf32>) {
      linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]} outs(%p : memref<1024xf32>) {
      ^bb0(%o: f32):
        %s = arith.addf %o, %o : f32
        linalg.yield %s : f32
      }
      return
    }

    // After -megatron-offload-to-gpu -canonicalize: 4 blocks of 256 threads.
    #map = affine_map<()[s0] -> (s0 * 256)>
    func.func @scale(%p: memref<1024xf32>) {
      %c4 = arith.constant 4 : index
      %c256 = arith.constant 256 : index
      %c1 = arith.constant 1 : index
      %t0 = gpu.wait async
      %t1 = gpu.launch async [%t0] blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
          threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1)
          module(@megatron_kernels) function(@scale_0) {
        %row = affine.apply #map()[%bx]
        %i = arith.addi %tx, %row : index
        %v = memref.load %p[%i] : memref<1024xf32>
        %s = arith.addf %v, %v : f32
        memref.store %s, %p[%i] : memref<1024xf32>
        gpu.terminator
      }
      gpu.wait [%t1]
      return
    }
    ```
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "256",
           "threads per block along the innermost parallel dimension">
  ];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect"
  ];
}

def GPULaunchToHostLoops : Pass<"megatron-gpu-launch-to-host-loops", "ModuleOp"> {
  let summary = "Run each gpu.launch as loops on the host (checking only)";
  let description = [{
    The CUDA target's kernels checked without a GPU: every `gpu.launch`
    becomes loops over its grid and its block, in order, around its body,
    and the async tokens and waits go. Valid for kernels without barriers
    or shared memory, which is what megatron-offload-to-gpu makes; a launch
    with either is an error. megatron-compile's --target=cuda-on-host runs
    the CUDA target's offloaded program this way against the CPU runtime.

    Example:

    ```mlir
    // After -megatron-gpu-launch-to-host-loops -canonicalize on
    // megatron-offload-to-gpu's example:
    #map = affine_map<()[s0] -> (s0 * 256)>
    func.func @scale(%p: memref<1024xf32>) {
      %c4 = arith.constant 4 : index
      %c256 = arith.constant 256 : index
      %c1 = arith.constant 1 : index
      %c0 = arith.constant 0 : index
      scf.for %bx = %c0 to %c4 step %c1 {
        scf.for %tx = %c0 to %c256 step %c1 {
          %row = affine.apply #map()[%bx]
          %i = arith.addi %tx, %row : index
          %v = memref.load %p[%i] : memref<1024xf32>
          %s = arith.addf %v, %v : f32
          memref.store %s, %p[%i] : memref<1024xf32>
        }
      }
      return
    }
    ```
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
}

#endif // MEGATRON_CONVERSION_PASSES_TD
