//===- GPT2.cpp - GPT-2 forward pass and loss in the tp dialect -----------===//
#include "megatron/Models/GPT2.h"
#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron/Dialect/TP/IR/WrittenArguments.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <vector>

using namespace mlir;
using namespace mlir::megatron;

std::optional<GPT2Config> GPT2Config::fromPreset(llvm::StringRef name) {
  auto make = [](int64_t layers, int64_t heads, int64_t embd) {
    GPT2Config config;
    config.layers = layers;
    config.heads = heads;
    config.embd = embd;
    return config;
  };
  if (name == "tiny") {
    GPT2Config config = make(2, 4, 64);
    config.vocab = 512;
    config.ctx = 64;
    config.seq = 32;
    config.batch = 2;
    return config;
  }
  // The Megatron-LM paper's Table 1 (Shoeybi et al. 2019): 96 channels per
  // head at every size, GPT-2's vocabulary padded to 51200, 1024 positions.
  auto megatron = [&](int64_t layers, int64_t heads) {
    GPT2Config config = make(layers, heads, 96 * heads);
    config.vocab = 51200;
    return config;
  };
  if (name == "megatron-1.2B")
    return megatron(40, 16);
  if (name == "megatron-2.5B")
    return megatron(54, 20);
  if (name == "megatron-4.2B")
    return megatron(64, 24);
  if (name == "megatron-8.3B")
    return megatron(72, 32);
  if (name == "124M")
    return make(12, 12, 768);
  if (name == "350M")
    return make(24, 16, 1024);
  if (name == "774M")
    return make(36, 20, 1280);
  if (name == "1558M")
    return make(48, 25, 1600);
  return std::nullopt;
}

std::string GPT2Config::validate() const {
  for (auto [value, what] :
       {std::pair{layers, "--layers"}, {heads, "--heads"}, {embd, "--embd"},
        {vocab, "--vocab"}, {ctx, "--ctx"}, {seq, "--seq"},
        {batch, "--batch"}})
    if (value < 1)
      return std::string(what) + " must be positive";
  if (embd % heads != 0)
    return "--heads " + std::to_string(heads) +
           " does not divide the embedding width " + std::to_string(embd);
  if (seq > ctx)
    return "--seq " + std::to_string(seq) +
           " exceeds the position table (--ctx " + std::to_string(ctx) + ")";
  // The largest tensors of the step, in bytes of fp32 (sizes, strides and
  // parameter counts downstream are int64).
  const std::pair<const char *, std::vector<int64_t>> tensors[] = {
      {"the token embedding [vocab, embd]", {vocab, embd}},
      {"the position table [ctx, embd]", {ctx, embd}},
      {"an MLP weight [embd, 4 embd]", {embd, 4, embd}},
      {"the logits [batch, seq, vocab]", {batch, seq, vocab}},
      {"the MLP activations [batch, seq, 4 embd]", {batch, seq, 4, embd}},
      {"the attention scores [batch, heads, seq, seq]",
       {batch, heads, seq, seq}},
      {"the layers' weights [layers, 13 embd, embd]", {layers, 13, embd, embd}},
  };
  for (const auto &[what, dims] : tensors) {
    int64_t bytes = 4;
    for (int64_t d : dims)
      if (__builtin_mul_overflow(bytes, d, &bytes))
        return std::string(what) + " would hold more than 2^63 bytes";
  }
  return "";
}

int64_t ParameterSpec::numElements() const {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

llvm::SmallVector<ParameterSpec>
megatron::getParameterSpecs(const GPT2Config &config) {
  using Init = ParameterSpec::Init;
  const int64_t c = config.embd;
  // GPT-2's initialisation: 2-D weights normal(0, 0.02), the residual
  // projections scaled by depth (0.02 / sqrt(2 L)), layer-norm gains 1,
  // biases 0.
  const double residualStd =
      0.02 / std::sqrt(2.0 * static_cast<double>(config.layers));
  auto weight = [](std::string name, llvm::SmallVector<int64_t, 2> shape,
                   double std = 0.02) {
    return ParameterSpec{std::move(name), std::move(shape), Init::Normal, std,
                         std::nullopt};
  };
  auto constant = [](std::string name, int64_t size, double value) {
    return ParameterSpec{std::move(name), {size}, Init::Constant, value,
                         std::nullopt};
  };
  llvm::SmallVector<ParameterSpec> specs = {weight("wte.weight", {config.vocab, c}),
                                            weight("wpe.weight", {config.ctx, c})};
  for (int64_t layer = 0; layer < config.layers; ++layer) {
    std::string h = "h." + std::to_string(layer) + ".";
    // Conv1D layout, as in the Hugging Face checkpoints: [in, out].
    llvm::SmallVector<ParameterSpec> block = {
        constant(h + "ln_1.weight", c, 1.0),
        constant(h + "ln_1.bias", c, 0.0),
        weight(h + "attn.c_attn.weight", {c, 3 * c}),
        constant(h + "attn.c_attn.bias", 3 * c, 0.0),
        weight(h + "attn.c_proj.weight", {c, c}, residualStd),
        constant(h + "attn.c_proj.bias", c, 0.0),
        constant(h + "ln_2.weight", c, 1.0),
        constant(h + "ln_2.bias", c, 0.0),
        weight(h + "mlp.c_fc.weight", {c, 4 * c}),
        constant(h + "mlp.c_fc.bias", 4 * c, 0.0),
        weight(h + "mlp.c_proj.weight", {4 * c, c}, residualStd),
        constant(h + "mlp.c_proj.bias", c, 0.0)};
    for (ParameterSpec &spec : block)
      spec.layer = layer;
    specs.append(block.begin(), block.end());
  }
  specs.append({constant("ln_f.weight", c, 1.0), constant("ln_f.bias", c, 0.0)});
  return specs;
}

int64_t megatron::countParameters(const GPT2Config &config) {
  int64_t total = 0;
  for (const ParameterSpec &spec : getParameterSpecs(config))
    total += spec.numElements();
  return total;
}

namespace {
constexpr float kLayerNormEpsilon = 1e-5f;

/// Generation's state, threaded through the layers: the chunk each
/// sequence adds, where it starts, and the caches as each layer leaves them.
struct KVCache {
  int64_t chunk;
  Value positions, keys, values;
};

/// Emits the ops of one forward pass; each op is located at the Hugging Face
/// module it comes from so that diagnostics name e.g. "h.3.mlp".
class GPT2Emitter {
public:
  GPT2Emitter(OpBuilder &builder, const GPT2Config &config,
              llvm::StringMap<Value> params)
      : b(builder), config(config), params(std::move(params)) {}

  Value forwardLoss(Value ids, Value targets) {
    Value logits = lmHead(layerNorm(layers(embed(ids)), "ln_f"));
    return tp::CrossEntropyOp::create(
        b, at("loss"), RankedTensorType::get({}, b.getF32Type()), logits,
        targets, config.vocab);
  }

  /// Generation's step on a chunk of `ids` ([B, chunk]) at `cache`'s
  /// positions: fills the caches and returns the logits ([B, V]) of each
  /// sequence's column `last`.
  Value generate(Value ids, KVCache &state, Value last) {
    cache = &state;
    Value x = layerNorm(layers(embed(ids)), "ln_f");
    auto hiddenType = RankedTensorType::get({config.batch, config.embd},
                                            b.getF32Type());
    Value h = tp::TakePositionOp::create(b, at("ln_f"), hiddenType, x, last);
    cache = nullptr;
    return lmHead(h);
  }

private:
  /// The op's module, within its layer's #tp.layer when in one.
  Location at(const std::string &name) {
    Location loc = NameLoc::get(b.getStringAttr(name));
    if (!currentLayer)
      return loc;
    return FusedLoc::get({loc}, tp::LayerAttr::get(b.getContext(), *currentLayer),
                         b.getContext());
  }
  Value param(const std::string &name) { return params.lookup(name); }
  /// [B, T, width] for the T tokens of each sequence the program takes.
  RankedTensorType activation(int64_t width) {
    return RankedTensorType::get({config.batch, chunk(), width},
                                 b.getF32Type());
  }
  int64_t chunk() const { return cache ? cache->chunk : config.seq; }

  Value layers(Value x) {
    for (int64_t layer = 0; layer < config.layers; ++layer) {
      currentLayer = layer;
      x = block(x, "h." + std::to_string(layer));
    }
    currentLayer.reset();
    return x;
  }

  /// The LM head is tied to the token embedding: logits = x * wte^T.
  Value lmHead(Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape.back() = config.vocab;
    return tp::MatmulOp::create(b, at("lm_head"), type.clone(shape), x,
                                param("wte.weight"), /*transpose_lhs=*/false,
                                /*transpose_rhs=*/true);
  }

  Value embed(Value ids) {
    Value tokens = tp::EmbeddingOp::create(b, at("wte"), activation(config.embd),
                                           param("wte.weight"), ids,
                                           /*offset=*/Value());
    if (cache) {
      Value positions = tp::PositionEmbeddingAtOp::create(
          b, at("wpe"), activation(config.embd), param("wpe.weight"),
          cache->positions);
      return tp::AddOp::create(b, at("wpe"), tokens, positions);
    }
    auto positionsType =
        RankedTensorType::get({config.seq, config.embd}, b.getF32Type());
    Value positions = tp::PositionEmbeddingOp::create(
        b, at("wpe"), positionsType, param("wpe.weight"));
    return tp::BiasAddOp::create(b, at("wpe"), tokens, positions);
  }

  /// Causal self-attention of the block: over the chunk itself, or,
  /// generating, over the cache the chunk is added to.
  Value attention(Value qkv, const std::string &h) {
    if (!cache)
      return tp::AttentionOp::create(b, at(h + ".attn"),
                                     activation(config.embd), qkv,
                                     config.heads);
    auto store = [&](Value into, tp::CacheSection section) -> Value {
      return tp::KVCacheStoreOp::create(b, at(h + ".attn"), qkv, into,
                                        cache->positions, *currentLayer,
                                        section, config.heads);
    };
    cache->keys = store(cache->keys, tp::CacheSection::key);
    cache->values = store(cache->values, tp::CacheSection::value);
    return tp::CachedAttentionOp::create(
        b, at(h + ".attn"), activation(config.embd), qkv, cache->keys,
        cache->values, cache->positions, *currentLayer, config.heads);
  }

  Value layerNorm(Value x, const std::string &prefix) {
    return tp::LayerNormOp::create(b, at(prefix), x,
                                   param(prefix + ".weight"),
                                   param(prefix + ".bias"),
                                   b.getF32FloatAttr(kLayerNormEpsilon));
  }

  /// x * W + bias for a Conv1D layer `prefix` of output width `width`.
  Value linear(Value x, const std::string &prefix, int64_t width) {
    Value product =
        tp::MatmulOp::create(b, at(prefix), activation(width), x,
                             param(prefix + ".weight"), false, false);
    return tp::BiasAddOp::create(b, at(prefix), product,
                                 param(prefix + ".bias"));
  }

  Value block(Value x, const std::string &h) {
    const int64_t c = config.embd;
    Value qkv = linear(layerNorm(x, h + ".ln_1"), h + ".attn.c_attn", 3 * c);
    Value heads = attention(qkv, h);
    Value attn = linear(heads, h + ".attn.c_proj", c);
    x = tp::AddOp::create(b, at(h + ".attn"), x, attn);
    Value fc = linear(layerNorm(x, h + ".ln_2"), h + ".mlp.c_fc", 4 * c);
    Value act = tp::GeluOp::create(b, at(h + ".mlp"), fc);
    Value mlp = linear(act, h + ".mlp.c_proj", c);
    return tp::AddOp::create(b, at(h + ".mlp"), x, mlp);
  }

  OpBuilder &b;
  const GPT2Config &config;
  llvm::StringMap<Value> params;
  std::optional<int64_t> currentLayer;
  KVCache *cache = nullptr; // while emitting a generation step
};

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
} // namespace

namespace {
/// Every parameter as an argument, in state-dict order, with its attributes.
struct ParameterArguments {
  llvm::SmallVector<ParameterSpec> specs;
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
};
ParameterArguments parameterArguments(Builder &b, const GPT2Config &config) {
  ParameterArguments params;
  params.specs = getParameterSpecs(config);
  for (const ParameterSpec &spec : params.specs) {
    params.types.push_back(RankedTensorType::get(spec.shape, b.getF32Type()));
    params.attrs.push_back(parameterAttrs(b, spec));
  }
  return params;
}

/// A function of `params` and then the `inputs`, its entry block ready.
func::FuncOp createModelFunction(OpBuilder &b, Location loc, StringRef name,
                                 const ParameterArguments &params,
                                 ArrayRef<std::pair<Type, DictionaryAttr>> inputs,
                                 TypeRange results) {
  SmallVector<Type> types(params.types);
  SmallVector<DictionaryAttr> attrs(params.attrs);
  for (auto [type, attr] : inputs) {
    types.push_back(type);
    attrs.push_back(attr);
  }
  auto function =
      func::FuncOp::create(b, loc, name, b.getFunctionType(types, results));
  function.setAllArgAttrs(attrs);
  // Hugging Face's GPT-2 checkpoints load as they are published.
  function->setAttr(tp::TPDialect::kCheckpointNamesAttrName,
                    b.getStringAttr(MGT_CHECKPOINT_NAMES_HF_GPT2));
  b.setInsertionPointToStart(function.addEntryBlock());
  return function;
}

llvm::StringMap<Value> parameterValues(const ParameterArguments &params,
                                       func::FuncOp function) {
  llvm::StringMap<Value> values;
  for (auto [spec, arg] : llvm::zip(params.specs, function.getArguments()))
    values[spec.name] = arg;
  return values;
}

/// Generation's step on chunks of `chunk` tokens: `entry` (prefill or
/// decode) of the generation program. Decode, the library's last entry,
/// carries the model's name, as the train step does beside @gpt2_forward.
void buildGenerationStep(OpBuilder &b, Location loc, const GPT2Config &config,
                         const ParameterArguments &params, StringRef entry,
                         int64_t chunk) {
  const bool prefill = entry == MGT_ENTRY_KIND_PREFILL;
  auto perSequence = RankedTensorType::get({config.batch}, b.getI32Type());
  auto cacheType = RankedTensorType::get(
      {config.layers, config.batch, config.heads, config.ctx,
       config.embd / config.heads},
      b.getF32Type());
  auto logitsType =
      RankedTensorType::get({config.batch, config.vocab}, b.getF32Type());
  std::pair<Type, DictionaryAttr> inputs[] = {
      {RankedTensorType::get({config.batch, chunk}, b.getI32Type()),
       prefill ? inputAttrs(b, "input_ids", tp::ArgumentRole::Tokens)
               : inputAttrs(b, "next_ids", tp::ArgumentRole::NextTokens)},
      {perSequence, inputAttrs(b, "positions", tp::ArgumentRole::Positions)},
      {perSequence, inputAttrs(b, "last_index", tp::ArgumentRole::LastIndex)},
      {cacheType, inputAttrs(b, "k_cache", tp::ArgumentRole::KVCache)},
      {cacheType, inputAttrs(b, "v_cache", tp::ArgumentRole::KVCache)},
      {logitsType, inputAttrs(b, "logits", tp::ArgumentRole::Logits)}};
  OpBuilder::InsertionGuard guard(b);
  func::FuncOp function = createModelFunction(
      b, loc, prefill ? "gpt2_prefill" : "gpt2", params, inputs, {});
  function->setAttr(tp::TPDialect::kEntryAttrName, b.getStringAttr(entry));
  auto input = [&](size_t i) {
    return function.getArgument(params.specs.size() + i);
  };
  KVCache cache{chunk, input(1), input(3), input(4)};
  GPT2Emitter emitter(b, config, parameterValues(params, function));
  Value logits = emitter.generate(input(0), cache, input(2));
  func::ReturnOp::create(b, loc);
  tp::returnWrittenInto(function, cache.keys, input(3));
  tp::returnWrittenInto(function, cache.values, input(4));
  tp::returnWrittenInto(function, logits, input(5));
}
} // namespace

OwningOpRef<ModuleOp> megatron::buildGPT2Module(MLIRContext &context,
                                                const GPT2Config &config) {
  context.loadDialect<tp::TPDialect, func::FuncDialect>();
  OpBuilder b(&context);
  Location loc = NameLoc::get(b.getStringAttr("gpt2"));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());

  ParameterArguments params = parameterArguments(b, config);
  auto tokensType =
      RankedTensorType::get({config.batch, config.seq}, b.getI32Type());
  std::pair<Type, DictionaryAttr> inputs[] = {
      {tokensType, inputAttrs(b, "input_ids", tp::ArgumentRole::Tokens)},
      {tokensType, inputAttrs(b, "targets", tp::ArgumentRole::Targets)}};
  Type lossType = RankedTensorType::get({}, b.getF32Type());
  func::FuncOp function =
      createModelFunction(b, loc, "gpt2", params, inputs, lossType);
  GPT2Emitter emitter(b, config, parameterValues(params, function));
  size_t numParams = params.specs.size();
  Value loss = emitter.forwardLoss(function.getArgument(numParams),
                                   function.getArgument(numParams + 1));
  func::ReturnOp::create(b, loc, loss);
  return module;
}

OwningOpRef<ModuleOp>
megatron::buildGPT2GenerationModule(MLIRContext &context,
                                    const GPT2Config &config) {
  context.loadDialect<tp::TPDialect, func::FuncDialect,
                      bufferization::BufferizationDialect>();
  OpBuilder b(&context);
  Location loc = NameLoc::get(b.getStringAttr("gpt2"));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  ParameterArguments params = parameterArguments(b, config);
  buildGenerationStep(b, loc, config, params, MGT_ENTRY_KIND_PREFILL,
                      config.seq);
  buildGenerationStep(b, loc, config, params, MGT_ENTRY_KIND_DECODE, 1);
  return module;
}
