//===- Passes.h - reports on a plan -----------------------------*- C++ -*-===//
//
// tp-explain, tp-view and tp-predict read a per-rank program and write a
// report about it (the plan's FLOPs, collectives and memory, a picture of a
// layer, predicted step times); none of them changes the program.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_ANALYSIS_PASSES_H
#define MEGATRON_ANALYSIS_PASSES_H

#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::megatron {

#define GEN_PASS_DECL
#include "megatron/Analysis/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megatron/Analysis/Passes.h.inc"

} // namespace mlir::megatron

#endif // MEGATRON_ANALYSIS_PASSES_H
