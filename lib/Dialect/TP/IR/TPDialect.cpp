//===- TPDialect.cpp - tp dialect registration and attribute hooks -------===//
#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tp;

#include "megatron/Dialect/TP/IR/TPOpsDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "megatron/Dialect/TP/IR/TPOpsTypes.cpp.inc"

void TPDialect::initialize() {
  registerAttributes();
  addTypes<
#define GET_TYPEDEF_LIST
#include "megatron/Dialect/TP/IR/TPOpsTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "megatron/Dialect/TP/IR/TPOps.cpp.inc"
      >();
}

/// The contract's name of each role.
static constexpr std::pair<ArgumentRole, const char *> kRoleNames[] = {
    {ArgumentRole::Parameter, MGT_ROLE_PARAM},
    {ArgumentRole::Tokens, MGT_ROLE_TOKENS},
    {ArgumentRole::Targets, MGT_ROLE_TARGETS},
    {ArgumentRole::Hyperparameters, MGT_ROLE_HYPERPARAMETERS},
    {ArgumentRole::Logits, MGT_ROLE_LOGITS},
    {ArgumentRole::AdamM, MGT_ROLE_ADAM_M},
    {ArgumentRole::AdamV, MGT_ROLE_ADAM_V},
    {ArgumentRole::Grad, MGT_ROLE_GRAD},
    {ArgumentRole::Master, MGT_ROLE_MASTER},
    {ArgumentRole::Input, MGT_ROLE_INPUT},
    {ArgumentRole::Output, MGT_ROLE_OUTPUT},
    {ArgumentRole::NextTokens, MGT_ROLE_NEXT_TOKENS},
    {ArgumentRole::Positions, MGT_ROLE_POSITIONS},
    {ArgumentRole::LastIndex, MGT_ROLE_LAST_INDEX},
    {ArgumentRole::KVCache, MGT_ROLE_KV_CACHE}};

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
    if (!phase ||
        !llvm::is_contained({"recompute", "backward", "optimizer"},
                            phase.getValue()))
      return op->emitOpError()
             << "'" << kPhaseAttrName
             << "' must be \"recompute\", \"backward\" or \"optimizer\"";
    return success();
  }
  if (attr.getName() == kCheckpointNamesAttrName) {
    if (!isa<StringAttr>(attr.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitOpError() << "'" << kCheckpointNamesAttrName
                               << "' must be a string on a function";
    return success();
  }
  if (attr.getName() == kPartitionedAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitOpError() << "'" << kPartitionedAttrName
                               << "' must be a unit attribute on a function";
    return success();
  }
  if (attr.getName() == kEntryAttrName) {
    static constexpr const char *kKinds[] = {
        MGT_ENTRY_KIND_FORWARD, MGT_ENTRY_KIND_TRAIN_STEP,
        MGT_ENTRY_KIND_FUNCTION, MGT_ENTRY_KIND_PREFILL, MGT_ENTRY_KIND_DECODE};
    auto entry = dyn_cast<StringAttr>(attr.getValue());
    if (entry && isa<FunctionOpInterface>(op) &&
        llvm::is_contained(kKinds, entry.getValue()))
      return success();
    InFlightDiagnostic diag = op->emitOpError()
                              << "'" << kEntryAttrName
                              << "' must be on a function, one of";
    for (const char *kind : kKinds)
      diag << " \"" << kind << "\"";
    return diag;
  }
  if (attr.getName() == kStepAttrName) {
    // Its fields are read, with located errors, where the library is made.
    if (!isa<DictionaryAttr>(attr.getValue()) || !isa<ModuleOp>(op))
      return op->emitOpError() << "'" << kStepAttrName
                               << "' must be a dictionary on a module";
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

/// Names key checkpoints and the manifest: two arguments of one name would
/// be one tensor to the runtime.
static LogicalResult verifyUniqueName(Operation *op, unsigned argIndex,
                                      StringAttr name) {
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return success();
  for (unsigned i = 0; i < argIndex; ++i)
    if (function.getArgAttrOfType<StringAttr>(i, TPDialect::kNameAttrName) ==
        name)
      return op->emitOpError()
             << "arguments #" << i << " and #" << argIndex << " have the same '"
             << TPDialect::kNameAttrName << "' \"" << name.getValue() << "\"";
  return success();
}

/// Function arguments carry a sharding and, for parameters, their name.
LogicalResult TPDialect::verifyRegionArgAttribute(Operation *op,
                                                  unsigned regionIndex,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  if (attr.getName() == kNameAttrName || attr.getName() == kParamAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "'" << attr.getName().getValue()
                               << "' of argument #" << argIndex
                               << " must be a string";
    if (attr.getName() == kNameAttrName)
      return verifyUniqueName(op, argIndex, cast<StringAttr>(attr.getValue()));
    return success();
  }
  if (attr.getName() == kRoleAttrName) {
    auto role = dyn_cast<StringAttr>(attr.getValue());
    if (role && symbolizeArgumentRole(role.getValue()))
      return success();
    InFlightDiagnostic diag = op->emitOpError()
                              << "'" << kRoleAttrName << "' of argument #"
                              << argIndex << " must be one of";
    for (auto [known, name] : kRoleNames)
      diag << " \"" << name << "\"";
    return diag;
  }
  if (attr.getName() == kInitAttrName || attr.getName() == kLayerAttrName) {
    if (attr.getName() == kInitAttrName ? !isa<InitAttr>(attr.getValue())
                                        : !isa<LayerAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << attr.getName().getValue() << "' of argument #"
             << argIndex << " must be a #"
             << attr.getName().getValue() << " attribute";
    return success();
  }
  Region &region = op->getRegion(regionIndex);
  if (region.empty() || argIndex >= region.getNumArguments())
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' on a missing argument #" << argIndex;
  auto type = dyn_cast<ShapedType>(region.getArgument(argIndex).getType());
  if (!type)
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' on argument #" << argIndex
                             << ", which is not a tensor";
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
  // Only FunctionOpInterface's verifier asks, for a result it has.
  auto function = cast<FunctionOpInterface>(op);
  assert(resultIndex < function.getNumResults() && "verifying a missing result");
  return verifyShardingAttr(op, attr, function.getResultTypes()[resultIndex]);
}

StringRef tp::stringifyArgumentRole(ArgumentRole role) {
  for (auto [known, name] : kRoleNames)
    if (known == role)
      return name;
  llvm_unreachable("unknown argument role");
}

std::optional<ArgumentRole> tp::symbolizeArgumentRole(StringRef name) {
  for (auto [role, known] : kRoleNames)
    if (name == known)
      return role;
  return std::nullopt;
}

ArgumentKind tp::getArgumentKind(FunctionOpInterface function,
                                 unsigned index) {
  ArgumentKind kind{ArgumentRole::Parameter, ""};
  // The verifier admitted only known roles.
  if (auto role = function.getArgAttrOfType<StringAttr>(
          index, TPDialect::kRoleAttrName))
    kind.role = *symbolizeArgumentRole(role.getValue());
  if (auto param = function.getArgAttrOfType<StringAttr>(
          index, TPDialect::kParamAttrName))
    kind.parameter = param.getValue();
  return kind;
}

SmallVector<NamedAttribute, 2>
tp::getArgumentKindAttrs(MLIRContext *context, ArgumentRole role,
                         StringRef parameter) {
  Builder b(context);
  SmallVector<NamedAttribute, 2> attrs = {
      b.getNamedAttr(TPDialect::kRoleAttrName,
                     b.getStringAttr(stringifyArgumentRole(role)))};
  if (!parameter.empty())
    attrs.push_back(b.getNamedAttr(TPDialect::kParamAttrName,
                                   b.getStringAttr(parameter)));
  return attrs;
}

void tp::setArgumentKind(FunctionOpInterface function, unsigned index,
                         ArgumentRole role, StringRef parameter) {
  for (NamedAttribute attr :
       getArgumentKindAttrs(function.getContext(), role, parameter))
    function.setArgAttr(index, attr.getName(), attr.getValue());
}
