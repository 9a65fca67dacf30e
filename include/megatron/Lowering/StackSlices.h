//===- StackSlices.h - one layer's member of a stack tensor ------*- C++ -*-===//
//
// A stack holds one tensor per layer along a new leading dimension:
// tensor<L x ...>. A member is one row of it, all of every other dimension,
// as a tensor of the member's rank. tp-stack-layer-arguments makes the
// step's per-layer arguments stacks, tp-roll-layers indexes them; both
// build and recognise members here.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_TRANSFORMS_STACKSLICES_H
#define MEGATRON_TRANSFORMS_STACKSLICES_H

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <optional>

namespace mlir::megatron {

/// tensor<count x member's shape>.
RankedTensorType getStackType(RankedTensorType memberType, int64_t count);

/// The member of `stack` at `slot` (a constant or an index value).
Value extractMember(OpBuilder &b, Location loc, Value stack, OpFoldResult slot);

/// `stack` with `member` written at `slot`.
Value insertMember(OpBuilder &b, Location loc, Value member, Value stack,
                   OpFoldResult slot);

/// A member read from a stack at a constant slot: the stack and the slot.
struct MemberRead {
  Value stack;
  int64_t slot;
};
std::optional<MemberRead> matchMemberRead(Value value);

/// The constant slot `insert` writes a whole member at, if it does.
std::optional<int64_t> matchMemberWrite(tensor::InsertSliceOp insert);

} // namespace mlir::megatron

#endif // MEGATRON_TRANSFORMS_STACKSLICES_H
