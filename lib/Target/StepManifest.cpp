//===- StepManifest.cpp - how each step argument is laid out --------------===//
//
// tp-step-manifest, and its inverse readStepRecord: the manifest and entry
// points travel on the module from the tp program to the library.
//
//===----------------------------------------------------------------------===//
#include "megatron/Analysis/PerformanceModel.h"
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/Utils/Utils.h"
#include "megatron/Lowering/LayerStacks.h"
#include "megatron/Target/Passes.h"
#include "megatron/Target/StepLibrary.h"
#include "megatron_rt/contract.h"

#include "Manifest.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_STEPMANIFEST
#include "megatron/Target/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

namespace {

std::string dtypeOf(Type type) {
  if (type.isF32())
    return MGT_DTYPE_F32;
  if (type.isInteger(32))
    return MGT_DTYPE_I32;
  if (type.isBF16())
    return MGT_DTYPE_BF16;
  std::string text;
  llvm::raw_string_ostream(text) << type;
  return text;
}

/// The manifest's splits of a tensor laid out as `sharding`: each axis of
/// each split dimension, with the dimension's sections; a sub-axis as its
/// axis's ranks it takes.
std::vector<mrun::Split> splitsOf(ShardingAttr sharding, MeshOp mesh) {
  std::vector<mrun::Split> splits;
  if (!sharding)
    return splits;
  for (unsigned dim = 0, e = sharding.getDims().size(); dim < e; ++dim)
    for (StringRef axis : sharding.getDimAxes(dim)) {
      mrun::Split split{static_cast<int>(dim), axis.str(),
                        sharding.getDimSections(dim)};
      if (std::optional<MeshOp::SubAxis> sub =
              mesh ? mesh.getSubAxis(axis) : std::nullopt) {
        split.axis = sub->parent.str();
        split.stride = sub->stride;
        split.size = sub->size;
      }
      splits.push_back(split);
    }
  return splits;
}

/// The valid vocabulary of the model's loss, or of the logits a generation
/// step writes (their unpadded width).
std::optional<int64_t> validVocab(func::FuncOp function) {
  std::optional<int64_t> vocab;
  function.walk([&](Operation *op) {
    if (auto loss = dyn_cast<CrossEntropyOp>(op))
      vocab = loss.getValidVocab();
    else if (auto max = dyn_cast<XentMaxOp>(op))
      vocab = max.getValidVocab();
  });
  if (vocab || !isGenerationEntry(function))
    return vocab;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    if (getArgumentKind(function, i).role != ArgumentRole::Logits)
      continue;
    // The unpadded shape where the vocabulary was padded, else the global
    // one (the argument's type is this rank's share).
    for (StringRef shape : {TPDialect::kUnpaddedShapeAttrName,
                            TPDialect::kGlobalShapeAttrName})
      if (auto attr = function.getArgAttrOfType<DenseI64ArrayAttr>(i, shape))
        return attr.asArrayRef().back();
    return cast<ShapedType>(function.getArgumentTypes()[i]).getShape().back();
  }
  return std::nullopt;
}

/// An argument of one of the library's entry functions.
struct EntryArgument {
  // Op handles are values; their accessors are not const.
  mutable func::FuncOp function;
  unsigned index;
  StringAttr name() const {
    return function.getArgAttrOfType<StringAttr>(index,
                                                 TPDialect::kNameAttrName);
  }
  Type type() const { return function.getArgumentTypes()[index]; }
};

/// The manifest's arguments: every argument of the last entry (a train step
/// takes all of its forward entry's), then those of the earlier entries it
/// has not (generation's prefill and decode differ in their tokens), matched
/// by tp.name. A located error for an argument without one, or one name of
/// two types.
FailureOr<SmallVector<EntryArgument>>
manifestArguments(ArrayRef<func::FuncOp> functions) {
  SmallVector<EntryArgument> args;
  llvm::StringMap<Type> seen;
  for (func::FuncOp function : llvm::reverse(functions))
    for (unsigned index = 0; index < function.getNumArguments(); ++index) {
      EntryArgument arg{function, index};
      if (!arg.name())
        return function.emitError("argument #")
               << index << " has no tp.name: the runtime cannot feed it";
      auto [known, added] = seen.try_emplace(arg.name(), arg.type());
      if (added)
        args.push_back(arg);
      else if (known->second != arg.type())
        return function.emitError("argument #")
               << index << " (" << arg.name().getValue() << ") has type "
               << arg.type()
               << " but another entry's argument of that name "
               << known->second;
    }
  return args;
}

/// Whether the step computes in bf16: some value in it holds bf16
/// (--precision=bf16 gives the GEMMs bf16 operands).
static bool computesInBf16(ModuleOp module) {
  return module
      .walk([](Operation *op) {
        for (Type type : op->getResultTypes())
          if (getElementTypeOrSelf(type).isBF16())
            return WalkResult::interrupt();
        return WalkResult::advance();
      })
      .wasInterrupted();
}

/// The manifest of the step whose arguments are `arguments`, written by
/// megatron-run's own writer and checked by its reader.
FailureOr<std::string> buildStepManifest(ModuleOp module,
                                         ArrayRef<EntryArgument> arguments,
                                         func::FuncOp function,
                                         ArrayRef<StepEntry> entries,
                                         ArrayRef<SmallVector<int32_t>> stacks,
                                         Target target) {
  int64_t tp = 1, dp = 1;
  for (auto mesh : module.getOps<MeshOp>()) {
    tp = mesh.getAxisSize(MGT_AXIS_NAME_TP).value_or(1);
    dp = mesh.getAxisSize(MGT_AXIS_NAME_DP).value_or(1);
  }
  mrun::Manifest manifest;
  manifest.dp = dp;
  manifest.tp = tp;
  for (const EntryArgument &arg : arguments) {
    func::FuncOp owner = arg.function;
    unsigned index = arg.index;
    StringAttr name = arg.name();
    auto type = cast<RankedTensorType>(arg.type());
    ArgumentKind kind = getArgumentKind(owner, index);
    if (kind.role == ArgumentRole::Parameter && !isParameter(owner, index))
      return owner.emitError("argument #")
             << index << " (" << name << ") holds " << type.getElementType()
             << ", which no parameter can: its tp.role must say what the "
                "runtime feeds it (\""
             << MGT_ROLE_TOKENS << "\", \"" << MGT_ROLE_TARGETS << "\")";
    ArrayRef<int64_t> local = type.getShape();
    auto globalAttr = owner.getArgAttrOfType<DenseI64ArrayAttr>(
        index, TPDialect::kGlobalShapeAttrName);
    ArrayRef<int64_t> global = globalAttr ? globalAttr.asArrayRef() : local;
    auto unpadded = owner.getArgAttrOfType<DenseI64ArrayAttr>(
        index, TPDialect::kUnpaddedShapeAttrName);
    if (kind.role == ArgumentRole::Tokens && type.getRank() == 2) {
      manifest.batch = global[0];
      manifest.seq = global[1];
    }
    mrun::Arg entry;
    entry.name = name.str();
    entry.role = stringifyArgumentRole(kind.role).str();
    entry.dtype = dtypeOf(type.getElementType());
    entry.globalShape = global.vec();
    entry.localShape = local.vec();
    entry.checkpointShape = (unpadded ? unpadded.asArrayRef() : global).vec();
    ShardingAttr sharding = getSharding(owner.getArgument(index));
    entry.splits = splitsOf(
        sharding, sharding ? SymbolTable::lookupNearestSymbolFrom<MeshOp>(
                                 owner, sharding.getMesh())
                           : MeshOp());
    entry.param = kind.parameter.str();
    if (auto init =
            owner.getArgAttrOfType<InitAttr>(index, TPDialect::kInitAttrName)) {
      entry.hasInit = true;
      entry.initNormal = init.getKind() == InitKind::normal;
      entry.initValue = init.getValue().convertToDouble();
    }
    // The host code of a CUDA step reads the hyperparameters itself (they
    // become kernel arguments); every other buffer is the kernels'.
    entry.onDevice = target == Target::CUDA &&
                     kind.role != ArgumentRole::Hyperparameters;
    manifest.args.push_back(std::move(entry));
  }
  for (const StepEntry &entry : entries) {
    manifest.entries.push_back(entry.kind);
    manifest.flops[entry.kind] = static_cast<double>(entry.flops);
  }
  // A framework's function has no loss; a model's step needs one.
  bool isFunction = entries.front().kind == MGT_ENTRY_KIND_FUNCTION;
  std::optional<int64_t> vocab =
      isFunction ? std::optional<int64_t>(0) : validVocab(function);
  if (!vocab)
    return function.emitError("the step has no cross-entropy loss");
  manifest.model = function.getName().str();
  manifest.target = target == Target::CUDA ? MGT_TARGET_CUDA : MGT_TARGET_CPU;
  manifest.validVocab = *vocab;
  manifest.compute = computesInBf16(module) ? MGT_DTYPE_BF16 : MGT_DTYPE_F32;
  for (ArrayRef<int32_t> stack : stacks)
    manifest.stacks.emplace_back(stack.begin(), stack.end());
  if (auto names = function->getAttrOfType<StringAttr>(
          TPDialect::kCheckpointNamesAttrName))
    manifest.checkpointNamesScheme = names.str();
  // One struct, written by the runtime's own writer: the compiler writes
  // what megatron-run reads, field for field.
  std::string text = mrun::writeManifest(manifest);
  // megatron-run's own reader: what it would refuse is refused here, where
  // the program can still be pointed at.
  if (std::string error = mrun::manifestError(text); !error.empty())
    return function.emitError("megatron-run would refuse this step's "
                              "manifest: ")
           << error;
  return text;
}

constexpr StringLiteral kManifestField = "manifest";
constexpr StringLiteral kTargetField = "target";
constexpr StringLiteral kEntriesField = "entries";
constexpr StringLiteral kKindField = "kind";
constexpr StringLiteral kFunctionField = "function";
constexpr StringLiteral kArgumentsField = "arguments";

/// Argument positions of `function` in the manifest's `arguments`, matched
/// by tp.name (manifestArguments checked that the names agree on types).
SmallVector<int32_t> manifestIndices(func::FuncOp function,
                                     ArrayRef<EntryArgument> arguments) {
  llvm::StringMap<int32_t> position;
  for (auto [i, arg] : llvm::enumerate(arguments))
    position[arg.name()] = i;
  SmallVector<int32_t> indices;
  for (unsigned i = 0; i < function.getNumArguments(); ++i)
    indices.push_back(position.lookup(EntryArgument{function, i}.name()));
  return indices;
}

/// Every entry's layer stacks as manifest indices, each once; a located
/// error if two entries stack an argument with different others.
FailureOr<SmallVector<SmallVector<int32_t>>>
manifestStacks(ArrayRef<func::FuncOp> functions, ArrayRef<StepEntry> entries,
               ArrayRef<EntryArgument> arguments) {
  SmallVector<SmallVector<int32_t>> stacks;
  DenseMap<int32_t, unsigned> stackOf;
  for (auto [function, entry] : llvm::zip(functions, entries))
    for (ArrayRef<unsigned> members :
         layerArgumentStacks(func::FuncOp(function))) {
      SmallVector<int32_t> stack = llvm::map_to_vector(
          members, [&](unsigned i) { return entry.argIndices[i]; });
      auto known = stackOf.find(stack.front());
      if (known != stackOf.end() && stacks[known->second] == stack)
        continue;
      for (int32_t member : stack)
        if (stackOf.count(member))
          return func::FuncOp(function).emitError("argument ")
                 << arguments[member].name()
                 << " is stacked with other layers' arguments than in "
                    "another entry";
      for (int32_t member : stack)
        stackOf[member] = stacks.size();
      stacks.push_back(std::move(stack));
    }
  return stacks;
}

/// The model FLOPs one call of `function` runs on this rank (a recomputed
/// forward is not counted: the achieved rate is the model's).
int64_t entryFlops(func::FuncOp function) {
  int64_t flops = 0;
  function.walk([&](Operation *op) {
    flops += executionsPerStep(op) * countModelFlops(op);
  });
  return flops;
}

/// The functions the library exports: a framework's function alone;
/// generation's prefill and decode (exactly when `generate`); or the
/// forward entry first, those tp-keep-forward marked or the module's one
/// function with a body.
FailureOr<SmallVector<func::FuncOp>> entryFunctions(ModuleOp module,
                                                    bool generate) {
  SmallVector<func::FuncOp> defined, forward, trainStep, functions, prefill,
      decode;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal())
      continue;
    defined.push_back(function);
    auto kind = function->getAttrOfType<StringAttr>(TPDialect::kEntryAttrName);
    if (!kind)
      continue;
    if (kind.getValue() == MGT_ENTRY_KIND_FUNCTION)
      functions.push_back(function);
    else if (kind.getValue() == MGT_ENTRY_KIND_PREFILL)
      prefill.push_back(function);
    else if (kind.getValue() == MGT_ENTRY_KIND_DECODE)
      decode.push_back(function);
    else
      (isForwardEntry(function) ? forward : trainStep).push_back(function);
  }
  size_t models = forward.size() + trainStep.size();
  if (!functions.empty()) {
    if (functions.size() != 1 || models || !prefill.empty() || !decode.empty())
      return module.emitError("tp-step-manifest: a function's step library "
                              "exports that function alone; the module marks ")
             << functions.size() << " functions and "
             << models + prefill.size() + decode.size() << " model entries";
    return functions;
  }
  if (generate != (!prefill.empty() || !decode.empty()))
    return module.emitError("tp-step-manifest: ")
           << (generate ? "generate, but the module has no prefill and "
                          "decode entries (gpt2-mlir --generate writes them)"
                        : "the module's entries are generation's (prefill, "
                          "decode): compile it with generate");
  if (generate) {
    if (prefill.size() != 1 || decode.size() != 1 || models)
      return module.emitError("tp-step-manifest: a generation step library "
                              "exports one prefill and one decode entry; the "
                              "module marks ")
             << prefill.size() << " and " << decode.size() << ", and "
             << models << " training entries";
    return SmallVector<func::FuncOp>{prefill.front(), decode.front()};
  }
  if (forward.empty() && trainStep.empty()) {
    if (defined.size() != 1)
      return module.emitError("tp-step-manifest: the module defines ")
             << defined.size()
             << " functions and marks none as an entry (tp.entry): the step "
                "library exports one forward entry";
    return defined;
  }
  if (forward.size() != 1 || trainStep.size() > 1)
    return module.emitError("tp-step-manifest: a step library exports one "
                            "forward entry and at most one train step; the "
                            "module marks ")
           << forward.size() << " and " << trainStep.size();
  forward.append(trainStep);
  return forward;
}

DictionaryAttr entryAttr(Builder &b, const StepEntry &entry) {
  return b.getDictionaryAttr(
      {b.getNamedAttr(kKindField, b.getStringAttr(entry.kind)),
       b.getNamedAttr(kFunctionField, b.getStringAttr(entry.function)),
       b.getNamedAttr(kArgumentsField,
                      b.getDenseI32ArrayAttr(entry.argIndices))});
}

struct StepManifestPass
    : public megatron::impl::StepManifestBase<StepManifestPass> {
  using StepManifestBase::StepManifestBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Target> where = symbolizeTarget(target);
    if (!where) {
      module.emitError("tp-step-manifest: unknown target '")
          << target << "'; use cpu, cuda or cuda-on-host";
      return signalPassFailure();
    }
    FailureOr<SmallVector<func::FuncOp>> functions =
        entryFunctions(module, generate);
    if (failed(functions))
      return signalPassFailure();
    FailureOr<SmallVector<EntryArgument>> arguments =
        manifestArguments(*functions);
    if (failed(arguments))
      return signalPassFailure();
    // The model's name, its checkpoints' names and its vocabulary are the
    // last entry's: the train step, the forward pass alone, or decode.
    func::FuncOp step = functions->back();
    SmallVector<StepEntry> entries;
    for (func::FuncOp function : *functions) {
      auto kind =
          function->getAttrOfType<StringAttr>(TPDialect::kEntryAttrName);
      entries.push_back({kind ? kind.str() : MGT_ENTRY_KIND_FORWARD,
                         function.getName().str(),
                         {},
                         entryFlops(function)});
    }
    for (auto [entry, function] : llvm::zip(entries, *functions))
      entry.argIndices = manifestIndices(function, *arguments);
    FailureOr<SmallVector<SmallVector<int32_t>>> stacks =
        manifestStacks(*functions, entries, *arguments);
    if (failed(stacks))
      return signalPassFailure();
    FailureOr<std::string> manifest = buildStepManifest(
        module, *arguments, step, entries, *stacks, *where);
    if (failed(manifest))
      return signalPassFailure();
    Builder b(module.getContext());
    SmallVector<Attribute> entryAttrs;
    for (const StepEntry &entry : entries)
      entryAttrs.push_back(entryAttr(b, entry));
    module->setAttr(
        TPDialect::kStepAttrName,
        b.getDictionaryAttr(
            {b.getNamedAttr(kManifestField, b.getStringAttr(*manifest)),
             b.getNamedAttr(kTargetField,
                            b.getStringAttr(stringifyTarget(*where))),
             b.getNamedAttr(kEntriesField, b.getArrayAttr(entryAttrs))}));
  }
};

/// `field` of `record`, of type T, or a located error naming it.
template <typename T>
FailureOr<T> getField(ModuleOp module, DictionaryAttr record,
                      StringRef field) {
  if (auto value = record.getAs<T>(field))
    return value;
  return module.emitError("'")
         << TPDialect::kStepAttrName << "' has no valid '" << field
         << "' field: it is what tp-step-manifest records";
}

FailureOr<StepEntry> readEntry(ModuleOp module, Attribute attr) {
  auto entry = dyn_cast<DictionaryAttr>(attr);
  if (!entry)
    return module.emitError("'")
           << TPDialect::kStepAttrName << "' entries must be dictionaries";
  FailureOr<StringAttr> kind = getField<StringAttr>(module, entry, kKindField);
  FailureOr<StringAttr> function =
      getField<StringAttr>(module, entry, kFunctionField);
  FailureOr<DenseI32ArrayAttr> arguments =
      getField<DenseI32ArrayAttr>(module, entry, kArgumentsField);
  if (failed(kind) || failed(function) || failed(arguments))
    return failure();
  if (!llvm::is_contained({StringRef(MGT_ENTRY_KIND_FORWARD),
                            StringRef(MGT_ENTRY_KIND_TRAIN_STEP),
                            StringRef(MGT_ENTRY_KIND_FUNCTION),
                            StringRef(MGT_ENTRY_KIND_PREFILL),
                            StringRef(MGT_ENTRY_KIND_DECODE)},
                           kind->getValue()))
    return module.emitError("unknown entry kind '") << kind->getValue() << "'";
  return StepEntry{kind->str(), function->str(),
                   SmallVector<int32_t>(arguments->asArrayRef())};
}

} // namespace

StringRef megatron::stringifyTarget(Target target) {
  switch (target) {
  case Target::CPU:
    return "cpu";
  case Target::CUDA:
    return "cuda";
  case Target::CUDAOnHost:
    return "cuda-on-host";
  }
  llvm_unreachable("unknown target");
}

std::optional<Target> megatron::symbolizeTarget(StringRef name) {
  for (Target target : {Target::CPU, Target::CUDA, Target::CUDAOnHost})
    if (name == stringifyTarget(target))
      return target;
  return std::nullopt;
}

FailureOr<StepRecord> megatron::readStepRecord(ModuleOp module) {
  auto record = module->getAttrOfType<DictionaryAttr>(TPDialect::kStepAttrName);
  if (!record)
    return module.emitError("the module has no '")
           << TPDialect::kStepAttrName
           << "': run tp-step-manifest on the per-rank program before the "
              "lowering";
  FailureOr<StringAttr> manifest =
      getField<StringAttr>(module, record, kManifestField);
  FailureOr<StringAttr> targetName =
      getField<StringAttr>(module, record, kTargetField);
  FailureOr<ArrayAttr> entryAttrs =
      getField<ArrayAttr>(module, record, kEntriesField);
  if (failed(manifest) || failed(targetName) || failed(entryAttrs))
    return failure();
  std::optional<Target> target = symbolizeTarget(targetName->getValue());
  if (!target)
    return module.emitError("unknown target '")
           << targetName->getValue() << "' in '" << TPDialect::kStepAttrName
           << "'";
  StepRecord step{manifest->getValue(), *target, {}};
  for (Attribute attr : *entryAttrs) {
    FailureOr<StepEntry> entry = readEntry(module, attr);
    if (failed(entry))
      return failure();
    step.entries.push_back(std::move(*entry));
  }
  return step;
}

void megatron::setEntryArguments(ModuleOp module, StringRef function,
                                 ArrayRef<int32_t> argIndices) {
  auto record = module->getAttrOfType<DictionaryAttr>(TPDialect::kStepAttrName);
  auto entries = record.getAs<ArrayAttr>(kEntriesField);
  Builder b(module.getContext());
  SmallVector<Attribute> updated;
  for (Attribute attr : entries) {
    auto entry = cast<DictionaryAttr>(attr);
    if (entry.getAs<StringAttr>(kFunctionField).getValue() == function) {
      NamedAttrList fields(entry);
      fields.set(kArgumentsField, b.getDenseI32ArrayAttr(argIndices));
      attr = fields.getDictionary(b.getContext());
    }
    updated.push_back(attr);
  }
  NamedAttrList fields(record);
  fields.set(kEntriesField, b.getArrayAttr(updated));
  module->setAttr(TPDialect::kStepAttrName,
                  fields.getDictionary(b.getContext()));
}
