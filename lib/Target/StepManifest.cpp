//===- StepManifest.cpp - how each step argument is laid out --------------===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Target/StepLibrary.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

namespace {

std::string dtypeOf(Type type) {
  if (type.isF32())
    return MGT_DTYPE_F32;
  if (type.isInteger(32))
    return MGT_DTYPE_I32;
  std::string text;
  llvm::raw_string_ostream(text) << type;
  return text;
}

llvm::json::Array shapeJson(ArrayRef<int64_t> shape) {
  return llvm::json::Array(shape);
}

llvm::json::Array splitJson(ShardingAttr sharding) {
  llvm::json::Array split;
  if (!sharding)
    return split;
  for (unsigned dim = 0, e = sharding.getDims().size(); dim < e; ++dim)
    for (StringRef axis : sharding.getDimAxes(dim))
      split.push_back(llvm::json::Object{
          {MGT_FIELD_SPLIT_DIM, dim},
          {MGT_FIELD_SPLIT_AXIS, axis},
          {MGT_FIELD_SPLIT_SECTIONS, sharding.getDimSections(dim)}});
  return split;
}

/// The valid vocabulary of the model's loss.
std::optional<int64_t> validVocab(func::FuncOp function) {
  std::optional<int64_t> vocab;
  function.walk([&](Operation *op) {
    if (auto loss = dyn_cast<CrossEntropyOp>(op))
      vocab = loss.getValidVocab();
    else if (auto max = dyn_cast<XentMaxOp>(op))
      vocab = max.getValidVocab();
  });
  return vocab;
}

/// A parameter's initialisation rule, as the model's #tp.init states it.
llvm::json::Object initJson(InitAttr init) {
  return llvm::json::Object{
      {MGT_FIELD_INIT_KIND,
       init.getKind() == InitKind::normal ? MGT_INIT_NORMAL : MGT_INIT_CONSTANT},
      {MGT_FIELD_INIT_VALUE, init.getValue().convertToDouble()}};
}

} // namespace

FailureOr<std::string>
megatron::buildStepManifest(ModuleOp module, func::FuncOp function,
                            ArrayRef<StepEntry> entries, Target target) {
  int64_t tp = 1;
  for (auto mesh : module.getOps<MeshOp>())
    tp = mesh.getAxisSize(MGT_AXIS_NAME_TP).value_or(1);
  llvm::json::Array args;
  int64_t batch = 0, seq = 0;
  for (BlockArgument arg : function.getArguments()) {
    unsigned index = arg.getArgNumber();
    auto name =
        function.getArgAttrOfType<StringAttr>(index, TPDialect::kNameAttrName);
    if (!name)
      return function.emitError("argument #")
             << index << " has no tp.name: the runtime cannot feed it";
    auto type = cast<RankedTensorType>(arg.getType());
    ArgumentKind kind = getArgumentKind(function, index);
    if (kind.role == ArgumentRole::Parameter && !isParameter(function, index))
      return function.emitError("argument #")
             << index << " (" << name << ") holds " << type.getElementType()
             << ", which no parameter can: its tp.role must say what the "
                "runtime feeds it (\""
             << MGT_ROLE_TOKENS << "\", \"" << MGT_ROLE_TARGETS << "\")";
    ArrayRef<int64_t> local = type.getShape();
    auto globalAttr = function.getArgAttrOfType<DenseI64ArrayAttr>(
        index, TPDialect::kGlobalShapeAttrName);
    ArrayRef<int64_t> global = globalAttr ? globalAttr.asArrayRef() : local;
    auto unpadded = function.getArgAttrOfType<DenseI64ArrayAttr>(
        index, TPDialect::kUnpaddedShapeAttrName);
    if (kind.role == ArgumentRole::Tokens && type.getRank() == 2) {
      batch = global[0];
      seq = global[1];
    }
    llvm::json::Object entry{
        {MGT_FIELD_NAME, name.getValue()},
        {MGT_FIELD_ROLE, stringifyArgumentRole(kind.role)},
        {MGT_FIELD_DTYPE, dtypeOf(type.getElementType())},
        {MGT_FIELD_GLOBAL_SHAPE, shapeJson(global)},
        {MGT_FIELD_LOCAL_SHAPE, shapeJson(local)},
        {MGT_FIELD_CHECKPOINT_SHAPE,
         shapeJson(unpadded ? unpadded.asArrayRef() : global)},
        {MGT_FIELD_SPLIT, splitJson(getSharding(arg))}};
    if (!kind.parameter.empty())
      entry[MGT_FIELD_PARAM] = kind.parameter;
    if (auto init =
            function.getArgAttrOfType<InitAttr>(index, TPDialect::kInitAttrName))
      entry[MGT_FIELD_INIT] = initJson(init);
    // The host code of a CUDA step reads the hyperparameters itself (they
    // become kernel arguments); every other buffer is the kernels'.
    bool onHost = target != Target::CUDA ||
                  kind.role == ArgumentRole::Hyperparameters;
    entry[MGT_FIELD_MEMORY] = onHost ? MGT_MEMORY_HOST : MGT_MEMORY_DEVICE;
    args.push_back(std::move(entry));
  }
  llvm::json::Array entryKinds;
  for (const StepEntry &entry : entries)
    entryKinds.push_back(entry.kind);
  std::optional<int64_t> vocab = validVocab(function);
  if (!vocab)
    return function.emitError("the step has no cross-entropy loss");
  llvm::json::Object manifest{
      {MGT_FIELD_FORMAT, MGT_MANIFEST_FORMAT},
      {MGT_FIELD_VERSION, MGT_MANIFEST_VERSION},
      {MGT_FIELD_MODEL, function.getName()},
      {MGT_FIELD_TARGET, target == Target::CUDA ? MGT_TARGET_CUDA : MGT_TARGET_CPU},
      {MGT_FIELD_TP, tp},
      {MGT_FIELD_BATCH, batch},
      {MGT_FIELD_SEQ, seq},
      {MGT_FIELD_VALID_VOCAB, *vocab},
      {MGT_FIELD_ENTRIES, std::move(entryKinds)},
      {MGT_FIELD_ARGS, std::move(args)}};
  if (auto names = function->getAttrOfType<StringAttr>(
          TPDialect::kCheckpointNamesAttrName))
    manifest[MGT_FIELD_CHECKPOINT_NAMES] = names.getValue();
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(manifest));
  return text;
}
