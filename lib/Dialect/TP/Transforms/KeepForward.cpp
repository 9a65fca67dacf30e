//===- KeepForward.cpp - the forward entry beside the training step -------===//
//
// A training step's library exports the forward pass too (validation runs
// it), so the forward program is copied before tp-autodiff and
// tp-optimizer turn the function into the training step.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Dialect/TP/Utils/Utils.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_KEEPFORWARD
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

struct KeepForwardPass
    : public megatron::impl::KeepForwardBase<KeepForwardPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(tp::verifyProgramDialects(getOperation(), getArgument())))
      return signalPassFailure();
    SymbolTable symbols(module);
    Builder b(module.getContext());
    for (auto step : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (step.isExternal())
        continue;
      if (isGenerationEntry(step)) {
        step.emitError() << "tp-keep-forward: '@" << step.getName()
                         << "' is a generation step: it has no loss to "
                            "train (compile it without train)";
        return signalPassFailure();
      }
      if (step->hasAttr(TPDialect::kEntryAttrName)) {
        step.emitError() << "tp-keep-forward: '@" << step.getName()
                         << "' is already an entry ("
                         << TPDialect::kEntryAttrName << ")";
        return signalPassFailure();
      }
      func::FuncOp forward = step.clone();
      forward.setName((step.getName() + "_forward").str());
      forward->setAttr(TPDialect::kEntryAttrName,
                       b.getStringAttr(MGT_ENTRY_KIND_FORWARD));
      step->setAttr(TPDialect::kEntryAttrName,
                    b.getStringAttr(MGT_ENTRY_KIND_TRAIN_STEP));
      // The symbol table renames the copy if the name is taken.
      symbols.insert(forward, std::next(Block::iterator(step)));
    }
  }
};

} // namespace
