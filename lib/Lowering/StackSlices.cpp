//===- StackSlices.cpp - one layer's member of a stack tensor -------------===//
#include "megatron/Lowering/StackSlices.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;

namespace {

/// Offsets, sizes and strides of the member of `memberType` at `slot`.
struct MemberBox {
  SmallVector<OpFoldResult> offsets, sizes, strides;
};
MemberBox memberBox(OpBuilder &b, RankedTensorType memberType,
                    OpFoldResult slot) {
  MemberBox box{{slot}, {b.getIndexAttr(1)}, {b.getIndexAttr(1)}};
  for (int64_t size : memberType.getShape()) {
    box.offsets.push_back(b.getIndexAttr(0));
    box.sizes.push_back(b.getIndexAttr(size));
    box.strides.push_back(b.getIndexAttr(1));
  }
  return box;
}

/// The constant slot of a box that is one whole member of `stackType`.
std::optional<int64_t> memberSlot(ArrayRef<OpFoldResult> offsets,
                                  ArrayRef<OpFoldResult> sizes,
                                  ArrayRef<OpFoldResult> strides,
                                  RankedTensorType stackType,
                                  RankedTensorType memberType) {
  if (stackType.getRank() != memberType.getRank() + 1 ||
      stackType.getShape().drop_front() != memberType.getShape() ||
      !isOneInteger(sizes.front()) ||
      !llvm::all_of(strides, [](OpFoldResult s) { return isOneInteger(s); }))
    return std::nullopt;
  for (unsigned d = 1; d < offsets.size(); ++d)
    if (!isZeroInteger(offsets[d]) ||
        getConstantIntValue(sizes[d]) != stackType.getDimSize(d))
      return std::nullopt;
  return getConstantIntValue(offsets.front());
}

} // namespace

RankedTensorType mlir::megatron::getStackType(RankedTensorType memberType,
                                              int64_t count) {
  SmallVector<int64_t> shape = {count};
  llvm::append_range(shape, memberType.getShape());
  return RankedTensorType::get(shape, memberType.getElementType());
}

Value mlir::megatron::extractMember(OpBuilder &b, Location loc, Value stack,
                                    OpFoldResult slot) {
  auto stackType = cast<RankedTensorType>(stack.getType());
  auto memberType = RankedTensorType::get(stackType.getShape().drop_front(),
                                          stackType.getElementType());
  MemberBox box = memberBox(b, memberType, slot);
  return tensor::ExtractSliceOp::create(b, loc, memberType, stack, box.offsets,
                                        box.sizes, box.strides);
}

Value mlir::megatron::insertMember(OpBuilder &b, Location loc, Value member,
                                   Value stack, OpFoldResult slot) {
  MemberBox box =
      memberBox(b, cast<RankedTensorType>(member.getType()), slot);
  return tensor::InsertSliceOp::create(b, loc, member, stack, box.offsets,
                                       box.sizes, box.strides);
}

std::optional<megatron::MemberRead>
mlir::megatron::matchMemberRead(Value value) {
  auto slice = value.getDefiningOp<tensor::ExtractSliceOp>();
  if (!slice)
    return std::nullopt;
  std::optional<int64_t> slot = memberSlot(
      slice.getMixedOffsets(), slice.getMixedSizes(), slice.getMixedStrides(),
      slice.getSourceType(), slice.getResultType());
  if (!slot)
    return std::nullopt;
  return MemberRead{slice.getSource(), *slot};
}

std::optional<int64_t>
mlir::megatron::matchMemberWrite(tensor::InsertSliceOp insert) {
  return memberSlot(insert.getMixedOffsets(), insert.getMixedSizes(),
                    insert.getMixedStrides(), insert.getDestType(),
                    insert.getSourceType());
}
