//===- Passes.td - megatron-mlir conversions ---------------*- tablegen -*-===//
#ifndef MEGATRON_CONVERSION_PASSES_TD
#define MEGATRON_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertTPToRuntime : Pass<"convert-tp-to-runtime", "ModuleOp"> {
  let summary = "Lower the per-rank tp program to runtime calls and linalg";
  let description = [{
    Runs on the output of tp-partition. GEMMs, attention, layer norm,
    embedding, the cross-entropy pieces and collectives become calls into
    libmegatron_rt on buffers (`bufferization.to_buffer` of operands, fresh
    `memref.alloc` results wrapped back with `bufferization.to_tensor`), so
    one-shot bufferization sees them; elementwise ops (bias add, residual
    add, GELU) become `linalg.generic` on tensors for elementwise fusion; the
    position embedding and local slices become `tensor.extract_slice`.
    Every function gains a leading `!llvm.ptr` argument, the rank's runtime
    context, and returns its scalar loss as `f32`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::tensor::TensorDialect"
  ];
}

def FinalizeRuntimeCalls : Pass<"finalize-runtime-calls", "ModuleOp"> {
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

#endif // MEGATRON_CONVERSION_PASSES_TD
