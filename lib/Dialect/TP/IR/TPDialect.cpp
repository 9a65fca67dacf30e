//===- TPDialect.cpp - tp dialect registration and attribute hooks -------===//
#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::tp;

#include "megatron/Dialect/TP/IR/TPOpsDialect.cpp.inc"

void TPDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "megatron/Dialect/TP/IR/TPOps.cpp.inc"
      >();
}

/// `tp.sharding` on a value of type `type`, reported at `anchor`.
static LogicalResult verifyShardingAttr(Operation *anchor, NamedAttribute attr,
                                        Type type) {
  auto sharding = dyn_cast<ShardingAttr>(attr.getValue());
  if (!sharding)
    return anchor->emitOpError() << "'" << attr.getName().getValue()
                                 << "' must be a #tp.sharding attribute";
  SymbolTableCollection symbolTable;
  return verifyShardingForType(anchor, sharding, type, symbolTable);
}

LogicalResult TPDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attr) {
  if (attr.getName() != kShardingAttrName)
    return op->emitOpError() << "unknown tp attribute '" << attr.getName().getValue()
                             << "' on an operation";
  if (op->getNumResults() != 1)
    return op->emitOpError() << "'" << kShardingAttrName
                             << "' needs an op with exactly one result";
  return verifyShardingAttr(op, attr, op->getResult(0).getType());
}

/// Function arguments carry a sharding and, for parameters, their name.
LogicalResult TPDialect::verifyRegionArgAttribute(Operation *op,
                                                  unsigned regionIndex,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  if (attr.getName() == kNameAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "'" << kNameAttrName << "' of argument #"
                               << argIndex << " must be a string";
    return success();
  }
  if (attr.getName() != kShardingAttrName)
    return op->emitOpError() << "unknown tp attribute '" << attr.getName().getValue()
                             << "' on argument #" << argIndex;
  Region &region = op->getRegion(regionIndex);
  if (region.empty() || argIndex >= region.getNumArguments())
    return op->emitOpError() << "'" << kShardingAttrName
                             << "' on a missing argument #" << argIndex;
  return verifyShardingAttr(op, attr, region.getArgument(argIndex).getType());
}

LogicalResult TPDialect::verifyRegionResultAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned resultIndex,
                                                     NamedAttribute attr) {
  if (attr.getName() != kShardingAttrName)
    return op->emitOpError() << "unknown tp attribute '" << attr.getName().getValue()
                             << "' on result #" << resultIndex;
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function || resultIndex >= function.getNumResults())
    return op->emitOpError() << "'" << kShardingAttrName
                             << "' on a missing result #" << resultIndex;
  return verifyShardingAttr(op, attr, function.getResultTypes()[resultIndex]);
}
