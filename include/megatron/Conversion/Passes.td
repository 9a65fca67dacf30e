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
    context, and returns its scalar loss as `f32`.

    The patterns come in families, one file each under
    lib/Conversion/TPToRuntime, each with its populate function
    (megatron/Conversion/TPToRuntime/TPToRuntime.h); the target's limits
    (RuntimeTargetInfo) come from the options.
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

def FinalizeRuntimeCalls : Pass<"megatron-finalize-runtime-calls", "ModuleOp"> {
  let summary = "Pass buffers to runtime calls as plain C pointers";
  let description = [{
    Runs after bufferization and buffer deallocation, when every runtime
    call's buffers are allocated and freed around it: each `memref<?xT>`
    operand of a call to an external function becomes the `!llvm.ptr` to its
    first element (aligned base plus offset), the C ABI libmegatron_rt
    exports, and the declarations follow.
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
    only orders work on the rank's stream. Runs after bufferization and
    megatron-finalize-runtime-calls: copies become `linalg.copy`; each `linalg` op
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
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
}

#endif // MEGATRON_CONVERSION_PASSES_TD
