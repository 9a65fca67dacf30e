//===- WrittenArguments.cpp - results the step writes into arguments ------===//
#include "megatron/Dialect/TP/IR/WrittenArguments.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::tp;

BlockArgument tp::addNamedArgument(func::FuncOp function, Type type,
                                   StringRef name, ArgumentRole role) {
  unsigned index = function.getNumArguments();
  (void)function.insertArgument(index, type, {}, function.getLoc());
  function.setArgAttr(index, TPDialect::kNameAttrName,
                      StringAttr::get(function.getContext(), name));
  setArgumentKind(function, index, role);
  return function.getArgument(index);
}

bufferization::MaterializeInDestinationOp
tp::returnWrittenInto(func::FuncOp function, Value value,
                      BlockArgument output) {
  auto ret = cast<func::ReturnOp>(function.front().getTerminator());
  OpBuilder b(ret);
  auto write = bufferization::MaterializeInDestinationOp::create(
      b, value.getLoc(), value, output);
  SmallVector<Value> results(ret.getOperands());
  results.push_back(write.getResult());
  ret->setOperands(results);
  function.setType(b.getFunctionType(function.front().getArgumentTypes(),
                                     TypeRange(ValueRange(results))));
  function.setResultAttr(results.size() - 1, TPDialect::kUpdatesAttrName,
                         b.getI64IntegerAttr(output.getArgNumber()));
  return write;
}
