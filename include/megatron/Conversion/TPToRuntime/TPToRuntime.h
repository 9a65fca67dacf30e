//===- TPToRuntime.h - tp ops to runtime calls and linalg -------*- C++ -*-===//
//
// The per-rank tp program lowers op by op: ops with a hand-written kernel
// become calls into the runtime (megatron_rt), elementwise ops become
// linalg.generic on tensors for elementwise fusion. The patterns come in
// families, one file each under lib/Conversion/TPToRuntime; a new op adds
// its pattern to its family's populate function. convert-tp-to-runtime
// applies the fusions first (each set in its own sweep, in the order below),
// then the op patterns.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_CONVERSION_TPTORUNTIME_TPTORUNTIME_H
#define MEGATRON_CONVERSION_TPTORUNTIME_TPTORUNTIME_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::megatron {

/// What the target's runtime can do that the shared lowering must respect.
struct RuntimeTargetInfo {
  /// A GEMM's epilogue computes GELU only when its rows are a multiple of
  /// this many elements: cuBLASLt keeps GELU's input (GELU_AUX, for the
  /// backward pass) only at such leading dimensions. The CPU runtime has no
  /// such limit but follows the CUDA target's, so that the CPU step fuses
  /// alike and stays the bit-for-bit reference of the GPU's program.
  int64_t geluEpilogueRowMultiple = 8;
  /// The element types the runtime's kernels store (their _f32 and _bf16
  /// variants).
  bool storesElementType(Type element) const;
};

// Fusions, applied before the op patterns: each replaces a chain of tp ops
// with one runtime call.

/// A GEMM whose one use adds a [N] bias (and maybe feeds a GELU): the bias,
/// and the GELU, in the GEMM's epilogue.
void populateGemmEpilogueFusionPatterns(RewritePatternSet &patterns,
                                        const RuntimeTargetInfo &target);
/// A tied table's gradient, the sum of its LM head's and its embedding's:
/// the embedding's rows added into the LM head's gradient in place.
void populateEmbeddingGradAccumulationPatterns(
    RewritePatternSet &patterns, const RuntimeTargetInfo &target);

// One pattern per op, grouped by family.

/// tp.matmul and tp.weight_grad: runtime GEMMs.
void populateGemmToRuntimePatterns(RewritePatternSet &patterns,
                                   const RuntimeTargetInfo &target);
/// Attention and its gradient (runtime kernels), softmax and its gradient
/// (linalg reductions).
void populateAttentionToRuntimePatterns(RewritePatternSet &patterns,
                                        const RuntimeTargetInfo &target);
/// Generation's ops: the KV cache's update (a runtime kernel writing the
/// cache in place) and attention over it, the position embedding at each sequence's start
/// and the column of the last prompt token (linalg gathers).
void populateGenerationToRuntimePatterns(RewritePatternSet &patterns,
                                         const RuntimeTargetInfo &target);
/// Layer norm and its gradient.
void populateNormalizationToRuntimePatterns(RewritePatternSet &patterns,
                                            const RuntimeTargetInfo &target);
/// Token and position embeddings and their gradients.
void populateEmbeddingToRuntimePatterns(RewritePatternSet &patterns,
                                        const RuntimeTargetInfo &target);
/// Adds, GELU and its gradient, precision conversions (linalg.generic) and
/// bias-gradient sums (a runtime call).
void populateElementwiseToRuntimePatterns(RewritePatternSet &patterns,
                                          const RuntimeTargetInfo &target);
/// Dropout (a runtime call drawing each element's mask from its global
/// index; the identity without the step's key).
void populateDropoutToRuntimePatterns(RewritePatternSet &patterns,
                                      const RuntimeTargetInfo &target);
/// The cross-entropy loss, its vocabulary-parallel pieces and its gradient.
void populateLossToRuntimePatterns(RewritePatternSet &patterns,
                                   const RuntimeTargetInfo &target);
/// The conjugates, collectives, axis indices and local slices.
void populateCollectiveToRuntimePatterns(RewritePatternSet &patterns,
                                         const RuntimeTargetInfo &target);
/// The gradient norm's sums of squares and AdamW.
void populateOptimizerToRuntimePatterns(RewritePatternSet &patterns,
                                        const RuntimeTargetInfo &target);

/// Every op pattern above (not the fusions).
void populateTPToRuntimePatterns(RewritePatternSet &patterns,
                                 const RuntimeTargetInfo &target);

} // namespace mlir::megatron

#endif // MEGATRON_CONVERSION_TPTORUNTIME_TPTORUNTIME_H
