//===- MixedPrecision.cpp - bf16 activations, fp32 master weights ---------===//
//
// Each op states the precision it computes in (PrecisionOpInterface, the
// rules in lib/Dialect/TP/IR/TPPrecisionRules.cpp); the pass walks the
// program in order, rounds or widens the operands that arrive in another
// precision, and retypes the results. Conversions are cached per value, so
// one bf16 copy of a parameter serves its forward and backward GEMMs.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/Utils/LayerLocations.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "megatron/Dialect/TP/IR/TP.h"

#include "megatron/Dialect/TP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tp-mixed-precision"

namespace mlir::megatron {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

bool handlesFloatTensors(Operation *op) {
  return llvm::any_of(op->getOperands(), isFloatTensor) ||
         llvm::any_of(op->getResults(), isFloatTensor);
}

Type withElementType(Value value, Type element) {
  return cast<RankedTensorType>(value.getType()).clone(element);
}

class MixedPrecisionRewriter {
public:
  explicit MixedPrecisionRewriter(func::FuncOp function)
      : function(function), b(function.getContext()),
        low(b.getBF16Type()), full(b.getF32Type()) {}

  LogicalResult run() {
    SmallVector<Operation *> ops;
    function.walk([&](Operation *op) {
      if (op != function)
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      if (auto precision = dyn_cast<PrecisionOpInterface>(op))
        apply(op, precision.getPrecisionRule());
      else if (isa<TPDialect>(op->getDialect()) && handlesFloatTensors(op))
        return op->emitOpError(
            "has no precision rule (PrecisionOpInterface) for mixed precision");
      else
        restoreOriginalTypes(op);
    }
    return success();
  }

private:
  Type elementFor(Precision precision, Type current, Type follow) {
    switch (precision) {
    case Precision::Keep:
      return current;
    case Precision::Low:
      return low;
    case Precision::Full:
      return full;
    case Precision::Follow:
      return follow;
    }
    llvm_unreachable("unknown precision");
  }

  /// bf16 when any float operand is, else the first one's element type.
  Type followedElement(Operation *op) {
    Type follow;
    for (Value operand : op->getOperands()) {
      if (!isFloatTensor(operand))
        continue;
      Type element = getElementTypeOrSelf(operand.getType());
      if (!follow || element == low)
        follow = element;
    }
    return follow;
  }

  void apply(Operation *op, const PrecisionRule &rule) {
    Type follow = followedElement(op);
    unsigned position = 0;
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isFloatTensor(operand.get()))
        continue;
      if (position < rule.operands.size()) {
        Type current = getElementTypeOrSelf(operand.get().getType());
        operand.set(convert(
            operand.get(),
            elementFor(rule.operands[position], current, follow)));
      }
      ++position;
    }
    for (auto [result, precision] :
         llvm::zip_equal(op->getResults(), rule.results)) {
      if (!isFloatTensor(result))
        continue;
      Type current = getElementTypeOrSelf(result.getType());
      Type element = elementFor(precision, current, follow);
      if (element == current)
        continue;
      originalTypes.try_emplace(result, result.getType());
      result.setType(withElementType(result, element));
    }
  }

  /// Ops with no rule (the return, host scalar code) see the types the
  /// program had before this pass.
  void restoreOriginalTypes(Operation *op) {
    for (OpOperand &operand : op->getOpOperands()) {
      auto original = originalTypes.find(operand.get());
      if (original != originalTypes.end())
        operand.set(convert(operand.get(),
                            getElementTypeOrSelf(original->second)));
    }
  }

  /// `value` in `element` precision, made once, right after `value` is.
  Value convert(Value value, Type element) {
    if (getElementTypeOrSelf(value.getType()) == element)
      return value;
    auto [cached, inserted] = conversions.try_emplace({value, element});
    if (!inserted)
      return cached->second;
    OpBuilder::InsertionGuard guard(b);
    bool isArgument = isa<BlockArgument>(value);
    if (Operation *def = value.getDefiningOp())
      b.setInsertionPointAfter(def);
    else if (lastArgumentConversion)
      b.setInsertionPointAfter(lastArgumentConversion);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(value).getOwner());
    auto conversion = ConvertOp::create(b, locationOf(value),
                                        withElementType(value, element), value);
    LLVM_DEBUG(llvm::dbgs() << "converted " << value << " to " << element
                            << "\n");
    // Parameters' copies head the function in the order they are needed.
    if (isArgument)
      lastArgumentConversion = conversion;
    cached->second = conversion.getResult();
    return cached->second;
  }

  /// A parameter's conversion is named after it, in its layer: the kernel
  /// that rounds `h.0.mlp.c_fc.weight` says so in a profile.
  Location locationOf(Value value) {
    auto arg = dyn_cast<BlockArgument>(value);
    if (!arg)
      return value.getLoc();
    if (auto name = function.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), TPDialect::kNameAttrName))
      return megatron::inLayerOf(arg, NameLoc::get(name, arg.getLoc()));
    return arg.getLoc();
  }

  func::FuncOp function;
  OpBuilder b;
  Type low, full;
  DenseMap<std::pair<Value, Type>, Value> conversions;
  DenseMap<Value, Type> originalTypes;
  Operation *lastArgumentConversion = nullptr;
};

struct MixedPrecisionPass
    : public megatron::impl::MixedPrecisionBase<MixedPrecisionPass> {
  void runOnOperation() override {
    if (failed(tp::verifyProgramDialects(getOperation(), getArgument())))
      return signalPassFailure();
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      // bf16 storage with fp32 master weights is a training recipe; the
      // KV cache and the sampled logits keep fp32.
      if (isGenerationEntry(function)) {
        function.emitError() << "tp-mixed-precision: '@" << function.getName()
                             << "' is a generation step, which compiles in "
                                "fp32 (precision=fp32)";
        return signalPassFailure();
      }
      if (failed(MixedPrecisionRewriter(function).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
