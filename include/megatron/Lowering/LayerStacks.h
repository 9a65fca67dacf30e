//===- LayerStacks.h - arguments that hold one tensor per layer -*- C++ -*-===//
//
// A transformer's layers take the same parameters, moments and master
// weights, one set per layer. The manifest declares each such family a
// stack, which the host allocates as one buffer, and
// tp-stack-layer-arguments makes it one argument of the step, so that a
// loop over the layers can index it. Both find the families here.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_LIB_TARGET_LAYERSTACKS_H
#define MEGATRON_LIB_TARGET_LAYERSTACKS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::megatron {

/// The arguments of `function` that hold one tensor per layer, grouped by
/// role and position among their layer's arguments of that role (a layer's
/// first parameter, its second, ...; a moment or master weight belongs to
/// its parameter's layer), each group in layer order. Every member of a
/// group has one type, sharding and global shape; a family that differs
/// between layers is no stack.
SmallVector<SmallVector<unsigned>> layerArgumentStacks(func::FuncOp function);

} // namespace mlir::megatron

#endif // MEGATRON_LIB_TARGET_LAYERSTACKS_H
