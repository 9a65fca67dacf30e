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
  if (attr.getName() == kPhaseAttrName) {
    auto phase = dyn_cast<StringAttr>(attr.getValue());
    if (!phase || (phase.getValue() != "backward" &&
                   phase.getValue() != "optimizer"))
      return op->emitOpError() << "'" << kPhaseAttrName
                               << "' must be \"backward\" or \"optimizer\"";
    return success();
  }
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
  Region &region = op->getRegion(regionIndex);
  if (region.empty() || argIndex >= region.getNumArguments())
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' on a missing argument #" << argIndex;
  auto type = cast<ShapedType>(region.getArgument(argIndex).getType());
  if (attr.getName() == kGlobalShapeAttrName ||
      attr.getName() == kUnpaddedShapeAttrName) {
    auto shape = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!shape || static_cast<int64_t>(shape.size()) != type.getRank())
      return op->emitOpError() << "'" << attr.getName().getValue()
                               << "' of argument #" << argIndex
                               << " must list one size per dimension";
    return success();
  }
  if (attr.getName() != kShardingAttrName)
    return op->emitOpError() << "unknown tp attribute '" << attr.getName().getValue()
                             << "' on argument #" << argIndex;
  // After tp-partition an argument holds this rank's slice; its sharding
  // describes the global tensor.
  if (auto function = dyn_cast<FunctionOpInterface>(op))
    if (auto global = function.getArgAttrOfType<DenseI64ArrayAttr>(
            argIndex, kGlobalShapeAttrName))
      return verifyShardingAttr(
          op, attr,
          RankedTensorType::get(global.asArrayRef(), type.getElementType()));
  return verifyShardingAttr(op, attr, type);
}

LogicalResult TPDialect::verifyRegionResultAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned resultIndex,
                                                     NamedAttribute attr) {
  if (attr.getName() == kUpdatesAttrName) {
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    auto function = dyn_cast<FunctionOpInterface>(op);
    if (!index || !function || index.getInt() < 0 ||
        index.getInt() >= function.getNumArguments() ||
        function.getArgumentTypes()[index.getInt()] !=
            function.getResultTypes()[resultIndex])
      return op->emitOpError() << "'" << kUpdatesAttrName << "' of result #"
                               << resultIndex
                               << " must name an argument of the same type";
    return success();
  }
  if (attr.getName() == kGradOfAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "'" << kGradOfAttrName << "' of result #"
                               << resultIndex << " must be a string";
    return success();
  }
  if (attr.getName() != kShardingAttrName)
    return op->emitOpError() << "unknown tp attribute '" << attr.getName().getValue()
                             << "' on result #" << resultIndex;
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function || resultIndex >= function.getNumResults())
    return op->emitOpError() << "'" << kShardingAttrName
                             << "' on a missing result #" << resultIndex;
  return verifyShardingAttr(op, attr, function.getResultTypes()[resultIndex]);
}

ArgumentKind tp::classifyArgument(StringRef name) {
  for (auto [fixed, role] :
       {std::pair{"input_ids", ArgumentRole::InputIds},
        {"targets", ArgumentRole::Targets},
        {"hyperparameters", ArgumentRole::Hyperparameters},
        {"logits", ArgumentRole::Logits}})
    if (name == fixed)
      return {role, ""};
  for (auto [suffix, role] : {std::pair{".exp_avg_sq", ArgumentRole::AdamV},
                              {".exp_avg", ArgumentRole::AdamM},
                              {".grad", ArgumentRole::Grad}})
    if (name.ends_with(suffix))
      return {role, name.drop_back(StringRef(suffix).size())};
  return {ArgumentRole::Parameter, ""};
}

StringRef tp::stringifyArgumentRole(ArgumentRole role) {
  switch (role) {
  case ArgumentRole::Parameter:
    return "param";
  case ArgumentRole::InputIds:
    return "input_ids";
  case ArgumentRole::Targets:
    return "targets";
  case ArgumentRole::Hyperparameters:
    return "hyperparameters";
  case ArgumentRole::Logits:
    return "logits";
  case ArgumentRole::AdamM:
    return "adam_m";
  case ArgumentRole::AdamV:
    return "adam_v";
  case ArgumentRole::Grad:
    return "grad";
  }
  llvm_unreachable("unknown argument role");
}

StringRef tp::getPhase(Operation *op) {
  if (auto phase = op->getAttrOfType<StringAttr>(TPDialect::kPhaseAttrName))
    return phase.getValue();
  return "forward";
}

void tp::markPhase(Operation *first, Operation *end, StringRef phase) {
  auto attr = StringAttr::get(first->getContext(), phase);
  for (Operation *op = first; op && op != end; op = op->getNextNode())
    op->setAttr(TPDialect::kPhaseAttrName, attr);
}
