//===- InitAll.h - register megatron-mlir with a host --------------*- C++ -*-===//
//
// What a framework embedding megatron-mlir in its own pipeline calls: the
// dialects the tp IR is written in or lowered through.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_INITALL_H
#define MEGATRON_INITALL_H

#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

namespace mlir::megatron {

inline void registerAllDialects(DialectRegistry &registry) {
  registry.insert<tp::TPDialect, func::FuncDialect, arith::ArithDialect,
                  tensor::TensorDialect, linalg::LinalgDialect,
                  shard::ShardDialect>();
}

} // namespace mlir::megatron

#endif // MEGATRON_INITALL_H
