//===- Passes.h - megatron-mlir conversions ---------------------*- C++ -*-===//
#ifndef MEGATRON_CONVERSION_PASSES_H
#define MEGATRON_CONVERSION_PASSES_H

#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir::megatron {

#define GEN_PASS_DECL
#include "megatron/Conversion/Passes.h.inc"

/// The module's functions with a body, taken before a conversion adds or
/// rewrites functions.
inline SmallVector<func::FuncOp> definedFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> functions;
  for (auto function : module.getOps<func::FuncOp>())
    if (!function.isExternal())
      functions.push_back(function);
  return functions;
}

#define GEN_PASS_REGISTRATION
#include "megatron/Conversion/Passes.h.inc"

} // namespace mlir::megatron

#endif // MEGATRON_CONVERSION_PASSES_H
