//===- StepLibrary.h - compile a partitioned program to a step .so -*- C++ -*-===//
//
// The CPU target: lowering pipeline, the manifest that tells the runtime how
// each argument is laid out, and the shared object exporting
//   const char *mgt_manifest(void);
//   float mgt_forward(mrt_context *ctx, void **args);
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_TARGET_STEPLIBRARY_H
#define MEGATRON_TARGET_STEPLIBRARY_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace mlir::megatron {

/// The JSON manifest of a partitioned module's step function: for every
/// argument its name, role, dtype, global and local shape, the shape a
/// checkpoint holds (before vocabulary padding) and how it is split.
FailureOr<std::string> buildStepManifest(ModuleOp partitioned);

/// convert-tp-to-runtime through bufferization, deallocation and the
/// conversion to the LLVM dialect.
void buildCPULoweringPipeline(OpPassManager &pm);

/// Registers `megatron-lower-cpu` (buildCPULoweringPipeline) for megatron-opt.
void registerCPULoweringPipeline();

enum class StepOutput { Object, SharedLibrary };

/// Translates the LLVM-dialect module, adds the exported entry points,
/// optimises at -O3 for the host and writes an object or a shared object
/// linked against libmegatron_rt.
LogicalResult emitStepLibrary(ModuleOp lowered, StringRef manifest,
                              StringRef outputPath, StepOutput output);

} // namespace mlir::megatron

#endif // MEGATRON_TARGET_STEPLIBRARY_H
