/*===-- megatron-c/Megatron.h - megatron-mlir's C API -------------*- C -*-===*\
|*                                                                            *|
|* For hosts that drive MLIR through its C API (a Python or Rust binding, a  *|
|* framework's C lowering code): the tp dialect, the passes and pipelines,   *|
|* and the step library. With these and upstream's C API (mlir-c/IR.h,       *|
|* mlir-c/Pass.h), which libMegatronCAPI carries, a host parses a tp module, *|
|* runs `megatron-pipeline{tp=2}` or `megatron-compile-pipeline{...}` and    *|
|* writes the step that megatron-run loads.                                  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef MEGATRON_C_MEGATRON_H
#define MEGATRON_C_MEGATRON_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The tp dialect. Registering it registers with it every dialect,
/// interface model and translation that tp programs and the pipelines use
/// (func, arith, tensor, linalg, bufferization, the LLVM and GPU
/// translations, ...); loading it also makes those available to the
/// context, so a context with only this dialect parses, partitions and
/// lowers a tp module.
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(TP, tp);

/// Registers every megatron-mlir pass and pipeline for textual pipelines
/// (mlirParsePassPipeline, mlirOpPassManagerAddPipeline):
/// `megatron-pipeline{tp=N}` (plan and partition),
/// `megatron-compile-pipeline{tp=N train=true target=cpu ...}` (all of
/// megatron-compile up to the LLVM dialect) and `megatron-lower-*`.
MLIR_CAPI_EXPORTED void mlirRegisterMegatronPasses(void);

/// The JSON manifest that tp-step-manifest (part of
/// megatron-compile-pipeline) recorded on `module`, owned by the module's
/// context; a null string (data == NULL) when there is none, said through
/// the context's diagnostic handlers.
MLIR_CAPI_EXPORTED MlirStringRef mlirMegatronGetStepManifest(MlirModule module);

/// Writes the shared object of a module megatron-compile-pipeline lowered
/// to `path`: what `megatron-compile -o path` writes. Errors are reported
/// through the context's diagnostic handlers.
MLIR_CAPI_EXPORTED MlirLogicalResult
mlirMegatronEmitStepLibrary(MlirModule module, MlirStringRef path);

#ifdef __cplusplus
}
#endif

#endif // MEGATRON_C_MEGATRON_H
