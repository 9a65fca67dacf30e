//===- StepLibrary.h - compile a partitioned program to a step .so -*- C++ -*-===//
//
// The manifest that tells the runtime how each argument is laid out and
// where it lives, and the shared object exporting
//   const char *mgt_manifest(void);
//   float mgt_forward(mrt_context *ctx, void **args);
//   void mgt_train_step(mrt_context *ctx, void **args, float *results);
// All entries take the same array, one pointer per manifest argument.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_TARGET_STEPLIBRARY_H
#define MEGATRON_TARGET_STEPLIBRARY_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::megatron {

/// Where the step runs. CUDAOnHost is the CUDA target's program with its
/// kernels as host loops: a CPU step in every other respect.
enum class Target { CPU, CUDA, CUDAOnHost };

/// An exported entry point wrapping one lowered function.
struct StepEntry {
  /// "forward" or "train_step"; the symbol is "mgt_" + kind.
  std::string kind;
  std::string function;
  /// For each of the function's arguments after the context, its position
  /// in the manifest's argument list.
  SmallVector<unsigned> argIndices;
};

/// The JSON manifest of a partitioned step function: for every argument its
/// name, role, dtype, global and local shape, the shape a checkpoint holds
/// (before vocabulary padding), how it is split and whether it lives in host
/// or device memory; the target and the entry points.
FailureOr<std::string> buildStepManifest(ModuleOp module, func::FuncOp step,
                                         ArrayRef<StepEntry> entries,
                                         Target target);

enum class StepOutput { Object, SharedLibrary };

/// Translates the LLVM-dialect module, adds the exported entry points,
/// optimises at -O3 for the host and writes an object or a shared object
/// linked against the target's runtime (libmegatron_rt or
/// libmegatron_rt_cuda).
LogicalResult emitStepLibrary(ModuleOp lowered, StringRef manifest,
                              ArrayRef<StepEntry> entries, Target target,
                              StringRef outputPath, StepOutput output);

} // namespace mlir::megatron

#endif // MEGATRON_TARGET_STEPLIBRARY_H
