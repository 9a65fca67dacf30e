//===- StepLibrary.h - compile a partitioned program to a step .so -*- C++ -*-===//
//
// The manifest that tells the runtime how each argument is laid out and
// where it lives, and the shared object exporting
//   const char *mgt_manifest(void);
//   float mgt_forward(mrt_context *ctx, void **args);
//   void mgt_train_step(mrt_context *ctx, void **args, float *results);
// All entries take the same array, one pointer per manifest argument.
//
// tp-step-manifest records the manifest and the entries on the per-rank tp
// program (the module's `tp.step`); the lowering carries it through to the
// LLVM dialect, where emitStepLibrary reads it back.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_TARGET_STEPLIBRARY_H
#define MEGATRON_TARGET_STEPLIBRARY_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::megatron {

/// Where the step runs. CUDAOnHost is the CUDA target's program with its
/// kernels as host loops: a CPU step in every other respect.
enum class Target { CPU, CUDA, CUDAOnHost };

/// "cpu", "cuda", "cuda-on-host": megatron-compile's --target and the
/// pipelines' `target` option.
StringRef stringifyTarget(Target target);
std::optional<Target> symbolizeTarget(StringRef name);

/// An exported entry point wrapping one lowered function.
struct StepEntry {
  /// "forward" or "train_step"; the symbol is "mgt_" + kind.
  std::string kind;
  std::string function;
  /// For each of the function's arguments after the context, its position
  /// in the manifest's argument list.
  SmallVector<int32_t> argIndices;
  /// The FLOPs of one call on one rank, as the explain report counts them
  /// (the manifest's "flops", which megatron-run's MFU divides).
  int64_t flops = 0;
};

/// What a step library is made of, besides its code.
struct StepRecord {
  /// The JSON manifest: for every argument its name, role, dtype, global and
  /// local shape, the shape a checkpoint holds (before vocabulary padding),
  /// how it is split and whether it lives in host or device memory; the
  /// target and the entry points. Held by the module's context.
  StringRef manifest;
  Target target;
  SmallVector<StepEntry> entries;
};

/// The record tp-step-manifest left on `module`, or a located error saying
/// why there is none.
FailureOr<StepRecord> readStepRecord(ModuleOp module);

/// Records on `module` that the entry wrapping `function` now takes the
/// manifest arguments `argIndices`, one per argument of the function.
void setEntryArguments(ModuleOp module, StringRef function,
                       ArrayRef<int32_t> argIndices);

enum class StepOutput { Object, SharedLibrary };

/// Translates the LLVM-dialect module, adds the entry points of its
/// StepRecord, optimises at -O3 for the host and writes an object or a
/// shared object linked against the target's runtime (libmegatron_rt or
/// libmegatron_rt_cuda, found beside the compiler library).
LogicalResult emitStepLibrary(ModuleOp lowered, StringRef outputPath,
                              StepOutput output);

} // namespace mlir::megatron

#endif // MEGATRON_TARGET_STEPLIBRARY_H
