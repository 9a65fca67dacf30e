//===- Passes.h - the step library -----------------------------*- C++ -*-===//
#ifndef MEGATRON_TARGET_PASSES_H
#define MEGATRON_TARGET_PASSES_H

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir::megatron {

#define GEN_PASS_DECL
#include "megatron/Target/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megatron/Target/Passes.h.inc"

} // namespace mlir::megatron

#endif // MEGATRON_TARGET_PASSES_H
