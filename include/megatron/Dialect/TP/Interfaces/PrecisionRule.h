//===- PrecisionRule.h - the precision an op computes in --------*- C++ -*-===//
//
// What an op says through PrecisionOpInterface for bf16 mixed precision
// (tp-mixed-precision): the precision of each float tensor operand, in
// order, and of each result.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_DIALECT_TP_INTERFACES_PRECISIONRULE_H
#define MEGATRON_DIALECT_TP_INTERFACES_PRECISIONRULE_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::tp {

enum class Precision {
  Keep,   // as it arrives (an fp32 statistic, a scalar)
  Low,    // bf16 storage
  Full,   // fp32
  Follow, // the type of the op's float operands, bf16 if any is
};

struct PrecisionRule {
  /// The precision of the op's float tensor operands, in order (operands
  /// past the list keep theirs).
  llvm::SmallVector<Precision, 4> operands;
  llvm::SmallVector<Precision, 1> results;

  /// Every operand and result in `precision`.
  static PrecisionRule uniform(Operation *op, Precision precision) {
    return {llvm::SmallVector<Precision, 4>(op->getNumOperands(), precision),
            llvm::SmallVector<Precision, 1>(op->getNumResults(), precision)};
  }
};

} // namespace mlir::tp

#endif // MEGATRON_DIALECT_TP_INTERFACES_PRECISIONRULE_H
