//===- WrittenArguments.h - results the step writes into arguments -*- C++ -*-===//
//
// The step library returns nothing but scalars: a tensor the caller reads
// back (the logits, a function's results) is written into an argument the
// caller allocates (or, as the KV cache, an argument it reads too).
// tp-export-logits, tp-function-entry and gpt2-mlir's generation program
// write them alike.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_DIALECT_TP_IR_WRITTENARGUMENTS_H
#define MEGATRON_DIALECT_TP_IR_WRITTENARGUMENTS_H

#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::tp {

/// A new last argument of `function`, of `type`, named `name` (tp.name)
/// with `role`.
BlockArgument addNamedArgument(func::FuncOp function, Type type,
                               StringRef name, ArgumentRole role);

/// Writes `value` into `output` (an argument of `function`) before the
/// return, and returns the write as one more result marked tp.updates, so
/// that the lowering writes the argument's buffer in place.
bufferization::MaterializeInDestinationOp
returnWrittenInto(func::FuncOp function, Value value, BlockArgument output);

} // namespace mlir::tp

#endif // MEGATRON_DIALECT_TP_IR_WRITTENARGUMENTS_H
