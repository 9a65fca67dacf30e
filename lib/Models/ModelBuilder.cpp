//===- ModelBuilder.cpp - the functions every model generator writes ------===//
#include "megatron/Models/ModelBuilder.h"
#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron/Dialect/TP/IR/WrittenArguments.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::megatron;

int64_t ParameterSpec::numElements() const {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

ParameterSpec ParameterSpec::normal(std::string name,
                                    llvm::SmallVector<int64_t, 2> shape,
                                    double std) {
  return {std::move(name), std::move(shape), Init::Normal, std, std::nullopt};
}

ParameterSpec ParameterSpec::constant(std::string name,
                                      llvm::SmallVector<int64_t, 2> shape,
                                      double value) {
  return {std::move(name), std::move(shape), Init::Constant, value,
          std::nullopt};
}

int64_t megatron::countParameters(ArrayRef<ParameterSpec> specs) {
  int64_t total = 0;
  for (const ParameterSpec &spec : specs)
    total += spec.numElements();
  return total;
}

std::string megatron::validateDropout(double rate) {
  if (rate >= 0.0 && rate < 1.0)
    return "";
  return "--dropout " + std::to_string(rate) + " is outside [0, 1)";
}

TransformerEmitter::~TransformerEmitter() = default;

Location TransformerEmitter::at(const std::string &name) {
  Location loc = NameLoc::get(b.getStringAttr(name));
  if (!currentLayer)
    return loc;
  return FusedLoc::get({loc}, tp::LayerAttr::get(b.getContext(), *currentLayer),
                       b.getContext());
}

RankedTensorType TransformerEmitter::activation(int64_t width) {
  return RankedTensorType::get({batch, chunk(), width}, b.getF32Type());
}

Value TransformerEmitter::layers(
    Value x, int64_t count, const std::string &prefix,
    function_ref<Value(Value, const std::string &)> block) {
  for (int64_t layer = 0; layer < count; ++layer) {
    currentLayer = layer;
    x = block(x, prefix + std::to_string(layer));
  }
  currentLayer.reset();
  return x;
}

Value TransformerEmitter::takePosition(Value x, Value last,
                                       const std::string &module) {
  auto type = RankedTensorType::get(
      {batch, cast<RankedTensorType>(x.getType()).getDimSize(2)},
      b.getF32Type());
  return tp::TakePositionOp::create(b, at(module), type, x, last);
}

Value TransformerEmitter::dropoutStream(DropoutSite site) {
  int64_t layer = currentLayer ? *currentLayer + 1 : 0;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(b.getInsertionBlock());
  return arith::ConstantIndexOp::create(
      b, NameLoc::get(b.getStringAttr("dropout")),
      layer * kDropoutSites + static_cast<int64_t>(site));
}

Value TransformerEmitter::dropout(Value x, DropoutSite site,
                                  const std::string &module) {
  if (dropoutRate == 0.0 || cache)
    return x;
  return tp::DropoutOp::create(b, at(module), x,
                               b.getF64FloatAttr(dropoutRate),
                               dropoutStream(site), /*key=*/Value(),
                               /*offsets=*/ValueRange(),
                               /*global_shape=*/DenseI64ArrayAttr());
}

Value TransformerEmitter::selfAttention(ValueRange inputs, int64_t heads,
                                        IntegerAttr kvHeads,
                                        const std::string &module) {
  // The result holds the queries' heads: a fused qkv's first third.
  int64_t queryWidth =
      cast<RankedTensorType>(inputs.front().getType()).getDimSize(2) /
      (inputs.size() == 1 ? 3 : 1);
  bool drops = dropoutRate != 0.0;
  return tp::AttentionOp::create(
      b, at(module), activation(queryWidth), inputs,
      b.getI64IntegerAttr(heads), kvHeads,
      drops ? b.getF64FloatAttr(dropoutRate) : FloatAttr(),
      drops ? dropoutStream(DropoutSite::Probabilities) : Value(),
      /*key=*/Value(), /*offsets=*/ValueRange(),
      /*global_shape=*/DenseI64ArrayAttr());
}

namespace {

/// The argument attributes of a parameter: its name, role, init and layer.
DictionaryAttr parameterAttrs(Builder &b, const ParameterSpec &spec) {
  tp::InitKind kind = spec.init == ParameterSpec::Init::Normal
                          ? tp::InitKind::normal
                          : tp::InitKind::constant;
  SmallVector<NamedAttribute> attrs = {
      b.getNamedAttr(tp::TPDialect::kNameAttrName, b.getStringAttr(spec.name)),
      b.getNamedAttr(tp::TPDialect::kRoleAttrName,
                     b.getStringAttr(tp::stringifyArgumentRole(
                         tp::ArgumentRole::Parameter))),
      b.getNamedAttr(tp::TPDialect::kInitAttrName,
                     tp::InitAttr::get(b.getContext(), kind, spec.initValue))};
  if (spec.layer)
    attrs.push_back(b.getNamedAttr(
        tp::TPDialect::kLayerAttrName,
        tp::LayerAttr::get(b.getContext(), *spec.layer)));
  return b.getDictionaryAttr(attrs);
}

/// The attributes of a model input: its name and role.
DictionaryAttr inputAttrs(Builder &b, StringRef name, tp::ArgumentRole role) {
  return b.getDictionaryAttr(
      {b.getNamedAttr(tp::TPDialect::kNameAttrName, b.getStringAttr(name)),
       b.getNamedAttr(tp::TPDialect::kRoleAttrName,
                      b.getStringAttr(tp::stringifyArgumentRole(role)))});
}

/// A module being written: its builder, and every parameter as an argument
/// of each function, in state-dict order, with its attributes.
class ModuleWriter {
public:
  ModuleWriter(MLIRContext &context, const ModelSignature &signature,
               ArrayRef<ParameterSpec> specs)
      : b(&context), signature(signature), specs(specs),
        loc(NameLoc::get(b.getStringAttr(signature.name))),
        module(ModuleOp::create(loc)) {
    b.setInsertionPointToEnd(module->getBody());
    for (const ParameterSpec &spec : specs) {
      types.push_back(RankedTensorType::get(spec.shape, b.getF32Type()));
      attrs.push_back(parameterAttrs(b, spec));
    }
  }

  /// A function of the parameters and then `inputs`, its entry block ready.
  func::FuncOp createFunction(StringRef name,
                              ArrayRef<std::pair<Type, DictionaryAttr>> inputs,
                              TypeRange results) {
    SmallVector<Type> argTypes(types);
    SmallVector<DictionaryAttr> argAttrs(attrs);
    for (auto [type, attr] : inputs) {
      argTypes.push_back(type);
      argAttrs.push_back(attr);
    }
    auto function = func::FuncOp::create(
        b, loc, name, b.getFunctionType(argTypes, results));
    function.setAllArgAttrs(argAttrs);
    function->setAttr(tp::TPDialect::kCheckpointNamesAttrName,
                      b.getStringAttr(signature.checkpointNames));
    b.setInsertionPointToStart(function.addEntryBlock());
    return function;
  }

  /// The function's input `i` (after the parameters).
  BlockArgument input(func::FuncOp function, size_t i) const {
    return function.getArgument(specs.size() + i);
  }

  std::unique_ptr<TransformerEmitter> emitter(EmitterFactory factory,
                                              func::FuncOp function) {
    llvm::StringMap<Value> values;
    for (auto [spec, arg] : llvm::zip(specs, function.getArguments()))
      values[spec.name] = arg;
    return factory(b, std::move(values));
  }

  OpBuilder b;
  const ModelSignature &signature;
  ArrayRef<ParameterSpec> specs;
  Location loc;
  OwningOpRef<ModuleOp> module;

private:
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
};

/// Generation's step on chunks of `chunk` tokens: `entry` (prefill or
/// decode) of the generation program. Decode, the library's last entry,
/// carries the model's name, as the train step does.
void buildGenerationStep(ModuleWriter &writer, EmitterFactory factory,
                         StringRef entry, int64_t chunk) {
  OpBuilder &b = writer.b;
  const ModelSignature &s = writer.signature;
  const bool prefill = entry == MGT_ENTRY_KIND_PREFILL;
  auto perSequence = RankedTensorType::get({s.batch}, b.getI32Type());
  auto cacheType = RankedTensorType::get(
      {s.layers, s.batch, s.cacheHeads, s.ctx, s.headWidth}, b.getF32Type());
  auto logitsType = RankedTensorType::get({s.batch, s.vocab}, b.getF32Type());
  std::pair<Type, DictionaryAttr> inputs[] = {
      {RankedTensorType::get({s.batch, chunk}, b.getI32Type()),
       prefill ? inputAttrs(b, "input_ids", tp::ArgumentRole::Tokens)
               : inputAttrs(b, "next_ids", tp::ArgumentRole::NextTokens)},
      {perSequence, inputAttrs(b, "positions", tp::ArgumentRole::Positions)},
      {perSequence, inputAttrs(b, "last_index", tp::ArgumentRole::LastIndex)},
      {cacheType, inputAttrs(b, "k_cache", tp::ArgumentRole::KVCache)},
      {cacheType, inputAttrs(b, "v_cache", tp::ArgumentRole::KVCache)},
      {logitsType, inputAttrs(b, "logits", tp::ArgumentRole::Logits)}};
  OpBuilder::InsertionGuard guard(b);
  func::FuncOp function = writer.createFunction(
      prefill ? s.name + "_prefill" : s.name, inputs, {});
  function->setAttr(tp::TPDialect::kEntryAttrName, b.getStringAttr(entry));
  auto input = [&](size_t i) { return writer.input(function, i); };
  KVCache cache{chunk, input(1), input(3), input(4)};
  Value logits =
      writer.emitter(factory, function)->generate(input(0), cache, input(2));
  func::ReturnOp::create(b, writer.loc);
  tp::returnWrittenInto(function, cache.keys, input(3));
  tp::returnWrittenInto(function, cache.values, input(4));
  tp::returnWrittenInto(function, logits, input(5));
}

} // namespace

OwningOpRef<ModuleOp>
megatron::buildTrainingModule(MLIRContext &context,
                              const ModelSignature &signature,
                              ArrayRef<ParameterSpec> specs,
                              EmitterFactory factory) {
  context.loadDialect<tp::TPDialect, func::FuncDialect, arith::ArithDialect>();
  ModuleWriter writer(context, signature, specs);
  OpBuilder &b = writer.b;
  auto tokensType =
      RankedTensorType::get({signature.batch, signature.seq}, b.getI32Type());
  std::pair<Type, DictionaryAttr> inputs[] = {
      {tokensType, inputAttrs(b, "input_ids", tp::ArgumentRole::Tokens)},
      {tokensType, inputAttrs(b, "targets", tp::ArgumentRole::Targets)}};
  Type lossType = RankedTensorType::get({}, b.getF32Type());
  func::FuncOp function =
      writer.createFunction(signature.name, inputs, lossType);
  Value loss = writer.emitter(factory, function)
                   ->forwardLoss(writer.input(function, 0),
                                 writer.input(function, 1));
  func::ReturnOp::create(b, writer.loc, loss);
  return std::move(writer.module);
}

OwningOpRef<ModuleOp>
megatron::buildGenerationModule(MLIRContext &context,
                                const ModelSignature &signature,
                                ArrayRef<ParameterSpec> specs,
                                EmitterFactory factory) {
  context.loadDialect<tp::TPDialect, func::FuncDialect,
                      bufferization::BufferizationDialect>();
  ModuleWriter writer(context, signature, specs);
  buildGenerationStep(writer, factory, MGT_ENTRY_KIND_PREFILL, signature.seq);
  buildGenerationStep(writer, factory, MGT_ENTRY_KIND_DECODE, 1);
  return std::move(writer.module);
}
