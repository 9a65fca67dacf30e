//===- GPT2.cpp - GPT-2 forward pass and loss in the tp dialect -----------===//
#include "megatron/Models/GPT2.h"
#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron_rt/contract.h"

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
  if (std::string bad = validateDropout(dropout); !bad.empty())
    return bad;
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

llvm::SmallVector<ParameterSpec>
megatron::getParameterSpecs(const GPT2Config &config) {
  const int64_t c = config.embd;
  // GPT-2's initialisation: 2-D weights normal(0, 0.02), the residual
  // projections scaled by depth (0.02 / sqrt(2 L)), layer-norm gains 1,
  // biases 0.
  const double residualStd =
      0.02 / std::sqrt(2.0 * static_cast<double>(config.layers));
  auto weight = [](std::string name, llvm::SmallVector<int64_t, 2> shape,
                   double std = 0.02) {
    return ParameterSpec::normal(std::move(name), std::move(shape), std);
  };
  auto constant = [](std::string name, int64_t size, double value) {
    return ParameterSpec::constant(std::move(name), {size}, value);
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
  return countParameters(getParameterSpecs(config));
}

namespace {
constexpr float kLayerNormEpsilon = 1e-5f;

/// GPT-2's forward pass; each op is located at the Hugging Face module it
/// comes from so that diagnostics name e.g. "h.3.mlp".
class GPT2Emitter final : public TransformerEmitter {
public:
  GPT2Emitter(OpBuilder &builder, const GPT2Config &config,
              llvm::StringMap<Value> params)
      : TransformerEmitter(builder, std::move(params), config.batch,
                           config.seq),
        config(config) {
    dropoutRate = config.dropout;
  }

  Value forwardLoss(Value ids, Value targets) override {
    Value logits = lmHead(layerNorm(blocks(embed(ids)), "ln_f"));
    return tp::CrossEntropyOp::create(
        b, at("loss"), RankedTensorType::get({}, b.getF32Type()), logits,
        targets, config.vocab);
  }

  Value generate(Value ids, KVCache &state, Value last) override {
    cache = &state;
    Value x = layerNorm(blocks(embed(ids)), "ln_f");
    Value h = takePosition(x, last, "ln_f");
    cache = nullptr;
    return lmHead(h);
  }

private:
  Value blocks(Value x) {
    return layers(x, config.layers, "h.",
                  [&](Value x, const std::string &h) { return block(x, h); });
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
    return dropout(tp::BiasAddOp::create(b, at("wpe"), tokens, positions),
                   DropoutSite::Embedding, "drop");
  }

  /// Causal self-attention of the block: over the chunk itself, or,
  /// generating, over the cache the chunk is added to.
  Value attention(Value qkv, const std::string &h) {
    if (!cache)
      return selfAttention(qkv, config.heads, /*kvHeads=*/IntegerAttr(),
                           h + ".attn");
    auto store = [&](Value into, tp::CacheSection section) -> Value {
      return tp::KVCacheStoreOp::create(
          b, at(h + ".attn"), qkv, into, cache->positions, *currentLayer,
          tp::CacheSectionAttr::get(b.getContext(), section), config.heads);
    };
    cache->keys = store(cache->keys, tp::CacheSection::key);
    cache->values = store(cache->values, tp::CacheSection::value);
    return tp::CachedAttentionOp::create(
        b, at(h + ".attn"), activation(config.embd), qkv, cache->keys,
        cache->values, cache->positions, *currentLayer, config.heads,
        /*kv_heads=*/IntegerAttr());
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
    Value attn = dropout(linear(heads, h + ".attn.c_proj", c),
                         DropoutSite::AttentionOutput, h + ".attn");
    x = tp::AddOp::create(b, at(h + ".attn"), x, attn);
    Value fc = linear(layerNorm(x, h + ".ln_2"), h + ".mlp.c_fc", 4 * c);
    Value act = tp::GeluOp::create(b, at(h + ".mlp"), fc);
    Value mlp = dropout(linear(act, h + ".mlp.c_proj", c),
                        DropoutSite::MLPOutput, h + ".mlp");
    return tp::AddOp::create(b, at(h + ".mlp"), x, mlp);
  }

  const GPT2Config &config;
};

ModelSignature signature(const GPT2Config &config) {
  // Hugging Face's GPT-2 checkpoints load as they are published.
  return {"gpt2",       MGT_CHECKPOINT_NAMES_HF_GPT2,
          config.batch, config.seq,
          config.vocab, config.layers,
          config.heads, config.ctx,
          config.embd / config.heads};
}

} // namespace

OwningOpRef<ModuleOp> megatron::buildGPT2Module(MLIRContext &context,
                                                const GPT2Config &config) {
  return buildFamilyModule<GPT2Emitter>(context, config, signature(config),
                                        ModuleKind::Training);
}

OwningOpRef<ModuleOp>
megatron::buildGPT2GenerationModule(MLIRContext &context,
                                    const GPT2Config &config) {
  return buildFamilyModule<GPT2Emitter>(context, config, signature(config),
                                        ModuleKind::Generation);
}
