//===- FinalizeRuntimeCalls.cpp - runtime calls take C pointers -----------===//
#include "megatron/Conversion/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_FINALIZERUNTIMECALLS
#include "megatron/Conversion/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

/// The address of `buffer`'s first element.
Value elementPointer(OpBuilder &b, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value address = arith::IndexCastOp::create(b, loc, b.getI64Type(), base);
  Value pointer = LLVM::IntToPtrOp::create(b, loc, ptrType, address);
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  Value offset = arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                            metadata.getOffset());
  return LLVM::GEPOp::create(b, loc, ptrType, type.getElementType(), pointer,
                             ValueRange{offset});
}

Type pointerFor(Type type) {
  if (isa<MemRefType>(type))
    return LLVM::LLVMPointerType::get(type.getContext());
  return type;
}

struct FinalizeRuntimeCallsPass
    : public megatron::impl::FinalizeRuntimeCallsBase<
          FinalizeRuntimeCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder b(&getContext());
    module.walk([&](func::CallOp call) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (!callee || !callee.isExternal())
        return;
      b.setInsertionPoint(call);
      for (OpOperand &operand : call->getOpOperands())
        if (isa<MemRefType>(operand.get().getType()))
          operand.set(elementPointer(b, call.getLoc(), operand.get()));
    });
    for (auto callee : module.getOps<func::FuncOp>()) {
      if (!callee.isExternal())
        continue;
      SmallVector<Type> inputs =
          llvm::map_to_vector(callee.getArgumentTypes(), pointerFor);
      callee.setType(b.getFunctionType(inputs, callee.getResultTypes()));
    }
  }
};

} // namespace
