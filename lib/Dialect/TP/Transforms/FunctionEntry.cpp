//===- FunctionEntry.cpp - a framework's function as the step's entry -----===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/IR/WrittenArguments.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Dialect/TP/Utils/Utils.h"
#include "megatron_rt/contract.h"

#include "mlir/IR/Builders.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_FUNCTIONENTRY
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

/// What the runtime feeds and reads back: f32 tensors of static shape.
bool isExchangeable(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() && tensor.getElementType().isF32();
}

LogicalResult verifyExchangeable(func::FuncOp function) {
  for (auto [index, type] : llvm::enumerate(function.getArgumentTypes()))
    if (!isExchangeable(type))
      return function.emitError("argument #")
             << index << " of '@" << function.getName() << "' is " << type
             << ": a function entry exchanges f32 tensors of static shape";
  // megatron-run gives every rank its slice of an input's whole value: a
  // pending sum over ranks would add it once per rank.
  for (BlockArgument arg : function.getArguments())
    if (ShardingAttr sharding = getSharding(arg);
        sharding && !sharding.getPartialAxes().empty())
      return function.emitError("argument #")
             << arg.getArgNumber() << " of '@" << function.getName()
             << "' is a partial sum over " << sharding.getPartialAxes()
             << ": a function entry's inputs hold their whole value";
  for (auto [index, type] : llvm::enumerate(function.getResultTypes()))
    if (!isExchangeable(type))
      return function.emitError("result #")
             << index << " of '@" << function.getName() << "' is " << type
             << ": a function entry exchanges f32 tensors of static shape";
  return success();
}

/// Names the inputs, and writes each result into its output argument.
void exportFunction(func::FuncOp function) {
  Builder b(function.getContext());
  for (unsigned index = 0, e = function.getNumArguments(); index < e; ++index) {
    function.setArgAttr(
        index, TPDialect::kNameAttrName,
        b.getStringAttr(MGT_INPUT_PREFIX + std::to_string(index)));
    setArgumentKind(function, index, ArgumentRole::Input);
  }
  auto ret = cast<func::ReturnOp>(function.front().getTerminator());
  SmallVector<Value> results(ret.getOperands());
  ret->setOperands({});
  function.setType(
      b.getFunctionType(function.front().getArgumentTypes(), TypeRange()));
  for (auto [index, value] : llvm::enumerate(results)) {
    BlockArgument output = addNamedArgument(
        function, value.getType(), MGT_OUTPUT_PREFIX + std::to_string(index),
        ArgumentRole::Output);
    returnWrittenInto(function, value, output);
  }
  function->setAttr(TPDialect::kEntryAttrName,
                    b.getStringAttr(MGT_ENTRY_KIND_FUNCTION));
}

struct FunctionEntryPass
    : public megatron::impl::FunctionEntryBase<FunctionEntryPass> {
  using FunctionEntryBase::FunctionEntryBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyGlobalProgram(module, getArgument(),
                                   ProgramDialects::TPAndLinalg)))
      return signalPassFailure();
    auto function = module.lookupSymbol<func::FuncOp>(entry);
    if (!function || function.isExternal()) {
      module.emitError("tp-function-entry: the module defines no function '@")
          << entry << "' to export";
      return signalPassFailure();
    }
    if (failed(verifyExchangeable(function)))
      return signalPassFailure();
    exportFunction(function);
  }
};

} // namespace
