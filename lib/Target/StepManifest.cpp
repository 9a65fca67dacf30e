//===- StepManifest.cpp - how each step argument is laid out --------------===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Target/StepLibrary.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

namespace {

std::string dtypeOf(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isInteger(32))
    return "i32";
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
          {"dim", dim}, {"axis", axis}, {"sections", sharding.getDimSections(dim)}});
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

} // namespace

FailureOr<std::string>
megatron::buildStepManifest(ModuleOp module, func::FuncOp function,
                            ArrayRef<StepEntry> entries, Target target) {
  int64_t tp = 1;
  for (auto mesh : module.getOps<MeshOp>())
    tp = mesh.getAxisSize("tp").value_or(1);
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
    ArrayRef<int64_t> local = type.getShape();
    auto globalAttr = function.getArgAttrOfType<DenseI64ArrayAttr>(
        index, TPDialect::kGlobalShapeAttrName);
    ArrayRef<int64_t> global = globalAttr ? globalAttr.asArrayRef() : local;
    auto unpadded = function.getArgAttrOfType<DenseI64ArrayAttr>(
        index, TPDialect::kUnpaddedShapeAttrName);
    ArgumentKind kind = classifyArgument(name.getValue());
    if (kind.role == ArgumentRole::InputIds && type.getRank() == 2) {
      batch = global[0];
      seq = global[1];
    }
    llvm::json::Object entry{
        {"name", name.getValue()},
        {"role", stringifyArgumentRole(kind.role)},
        {"dtype", dtypeOf(type.getElementType())},
        {"global_shape", shapeJson(global)},
        {"local_shape", shapeJson(local)},
        {"checkpoint_shape",
         shapeJson(unpadded ? unpadded.asArrayRef() : global)},
        {"split", splitJson(getSharding(arg))}};
    if (!kind.parameter.empty())
      entry["param"] = kind.parameter;
    // The host code of a CUDA step reads the hyperparameters itself (they
    // become kernel arguments); every other buffer is the kernels'.
    bool onHost = target != Target::CUDA ||
                  kind.role == ArgumentRole::Hyperparameters;
    entry["memory"] = onHost ? "host" : "device";
    args.push_back(std::move(entry));
  }
  llvm::json::Array entryKinds;
  for (const StepEntry &entry : entries)
    entryKinds.push_back(entry.kind);
  std::optional<int64_t> vocab = validVocab(function);
  if (!vocab)
    return function.emitError("the step has no cross-entropy loss");
  llvm::json::Object manifest{{"format", "megatron-step"},
                              {"version", 1},
                              {"model", "gpt2"},
                              {"target", target == Target::CUDA ? "cuda" : "cpu"},
                              {"tp", tp},
                              {"batch", batch},
                              {"seq", seq},
                              {"valid_vocab", *vocab},
                              {"entries", std::move(entryKinds)},
                              {"args", std::move(args)}};
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(manifest));
  return text;
}
