//===- InitAll.h - register megatron-mlir with a host --------------*- C++ -*-===//
//
// What a tool or a framework embedding megatron-mlir in its own pipeline
// calls: the tp dialect and every upstream dialect, interface model and
// extension the lowering goes through (bufferization needs the external
// models of linalg, tensor and arith; the CUDA target, the NVVM and GPU
// translations to LLVM IR).
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_INITALL_H
#define MEGATRON_INITALL_H

#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

namespace mlir::megatron {

inline void registerAllDialects(DialectRegistry &registry) {
  registry.insert<tp::TPDialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates kernels to LLVM IR in-process.
  mlir::registerAllToLLVMIRTranslations(registry);
}

} // namespace mlir::megatron

#endif // MEGATRON_INITALL_H
