//===- Passes.h - buffer and loop lowering ----------------------*- C++ -*-===//
//
// The passes between a per-rank tp program and the target's LLVM dialect
// that both targets share: the layer cut (fuse the residual norm, stack the
// per-layer arguments, outline and roll the layers), the buffer passes after
// bufferization (elide copies, free at last use, plan one arena) and the host
// loop passes (fuse elementwise chains, approximate math, run large loops on
// the runtime's threads).
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_LOWERING_PASSES_H
#define MEGATRON_LOWERING_PASSES_H

#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::megatron {

#define GEN_PASS_DECL
#include "megatron/Lowering/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megatron/Lowering/Passes.h.inc"

} // namespace mlir::megatron

#endif // MEGATRON_LOWERING_PASSES_H
