//===- ExportLogits.cpp - write the loss's logits into an argument --------===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_EXPORTLOGITS
#include "megatron/Transforms/Passes.h.inc"
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
  unsigned index = function.getNumArguments();
  (void)function.insertArgument(index, type, {}, function.getLoc());
  BlockArgument output = function.getArgument(index);
  function.setArgAttr(index, TPDialect::kNameAttrName, b.getStringAttr("logits"));
  setArgumentKind(function, index, ArgumentRole::Logits);
  if (ShardingAttr sharding = getSharding(logits))
    setSharding(output, withoutPartial(sharding));
  if (loss.getValidVocab() != static_cast<uint64_t>(type.getShape().back())) {
    SmallVector<int64_t> unpadded(type.getShape());
    unpadded.back() = loss.getValidVocab();
    function.setArgAttr(index, TPDialect::kUnpaddedShapeAttrName,
                        b.getDenseI64ArrayAttr(unpadded));
  }

  auto ret = cast<func::ReturnOp>(function.front().getTerminator());
  b.setInsertionPoint(ret);
  auto write = bufferization::MaterializeInDestinationOp::create(
      b, loss.getLoc(), logits, output);
  if (ShardingAttr sharding = getSharding(output))
    setSharding(write.getResult(), sharding);
  SmallVector<Value> results(ret.getOperands());
  results.push_back(write.getResult());
  ret->setOperands(results);
  function.setType(b.getFunctionType(function.front().getArgumentTypes(),
                                     TypeRange(ValueRange(results))));
  function.setResultAttr(results.size() - 1, TPDialect::kUpdatesAttrName,
                         b.getI64IntegerAttr(index));
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
