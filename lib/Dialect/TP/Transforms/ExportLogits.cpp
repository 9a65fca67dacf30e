//===- ExportLogits.cpp - write the loss's logits into an argument --------===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/IR/WrittenArguments.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_EXPORTLOGITS
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

LogicalResult exportLogits(func::FuncOp function) {
  CrossEntropyOp loss;
  function.walk([&](CrossEntropyOp op) { loss = op; });
  if (!loss)
    return function.emitError("tp-export-logits needs a tp.cross_entropy loss");
  OpBuilder b(function.getContext());
  Value logits = loss.getLogits();
  auto type = loss.getLogits().getType();
  BlockArgument output =
      addNamedArgument(function, type, "logits", ArgumentRole::Logits);
  if (ShardingAttr sharding = getSharding(logits))
    setSharding(output, withoutPartial(sharding));
  if (loss.getValidVocab() != static_cast<uint64_t>(type.getShape().back())) {
    SmallVector<int64_t> unpadded(type.getShape());
    unpadded.back() = loss.getValidVocab();
    function.setArgAttr(output.getArgNumber(),
                        TPDialect::kUnpaddedShapeAttrName,
                        b.getDenseI64ArrayAttr(unpadded));
  }
  auto write = returnWrittenInto(function, logits, output);
  write->setLoc(loss.getLoc());
  if (ShardingAttr sharding = getSharding(output))
    setSharding(write.getResult(), sharding);
  return success();
}

struct ExportLogitsPass
    : public megatron::impl::ExportLogitsBase<ExportLogitsPass> {
  void runOnOperation() override {
    if (failed(verifyGlobalProgram(getOperation(), getArgument())))
      return signalPassFailure();
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() && failed(exportLogits(function)))
        return signalPassFailure();
  }
};

} // namespace
