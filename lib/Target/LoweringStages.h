//===- LoweringStages.h - the stages both targets share ---------*- C++ -*-===//
#ifndef MEGATRON_LIB_TARGET_LOWERINGSTAGES_H
#define MEGATRON_LIB_TARGET_LOWERINGSTAGES_H

#include "mlir/Pass/PassManager.h"

namespace mlir::megatron {

/// tp-fuse-residual-norm, tp-outline-layers (with `outlineLayers`),
/// convert-tp-to-runtime, elementwise fusion, one-shot bufferization,
/// deallocation and megatron-finalize-runtime-calls: the step on buffers, runtime
/// calls on pointers, the rest as linalg ops. `hostMemory`: the buffers are
/// the host's (the CPU target, and the CUDA one run on the host).
void addBufferizedRuntimeStages(OpPassManager &pm, bool outlineLayers,
                                bool hostMemory);

/// The host code's memrefs, math, arithmetic, functions and control flow to
/// the LLVM dialect, buffers from the runtime's allocator.
void addHostToLLVMStages(OpPassManager &pm);

} // namespace mlir::megatron

#endif // MEGATRON_LIB_TARGET_LOWERINGSTAGES_H
