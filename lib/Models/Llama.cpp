//===- Llama.cpp - Llama forward pass and loss in the tp dialect ----------===//
#include "megatron/Models/Llama.h"
#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron_rt/contract.h"

#include <cstdint>
#include <vector>

using namespace mlir;
using namespace mlir::megatron;

std::optional<LlamaConfig> LlamaConfig::fromPreset(llvm::StringRef name) {
  auto make = [](int64_t layers, int64_t heads, int64_t kvHeads, int64_t embd,
                 int64_t ffn, int64_t vocab, int64_t ctx, double theta) {
    LlamaConfig config;
    config.layers = layers;
    config.heads = heads;
    config.kvHeads = kvHeads;
    config.embd = embd;
    config.ffn = ffn;
    config.vocab = vocab;
    config.ctx = ctx;
    config.ropeTheta = theta;
    return config;
  };
  if (name == "tiny") {
    LlamaConfig config = make(2, 4, 2, 64, 192, 512, 64, 10000.0);
    config.seq = 32;
    config.batch = 2;
    return config;
  }
  // The published configurations (config.json of each checkpoint).
  if (name == "llama2-7B")
    return make(32, 32, 32, 4096, 11008, 32000, 4096, 10000.0);
  if (name == "llama3-8B")
    return make(32, 32, 8, 4096, 14336, 128256, 8192, 500000.0);
  if (name == "llama3-70B")
    return make(80, 64, 8, 8192, 28672, 128256, 8192, 500000.0);
  return std::nullopt;
}

llvm::StringRef LlamaConfig::presetNames() {
  return "tiny, llama2-7B, llama3-8B or llama3-70B";
}

std::string LlamaConfig::validate() const {
  for (auto [value, what] :
       {std::pair{layers, "--layers"}, {heads, "--heads"},
        {kvHeads, "--kv-heads"}, {embd, "--embd"}, {ffn, "--ffn"},
        {vocab, "--vocab"}, {ctx, "--ctx"}, {seq, "--seq"},
        {batch, "--batch"}})
    if (value < 1)
      return std::string(what) + " must be positive";
  if (std::string bad = validateDropout(dropout); !bad.empty())
    return bad;
  if (embd % heads != 0)
    return "--heads " + std::to_string(heads) +
           " does not divide the embedding width " + std::to_string(embd);
  if (heads % kvHeads != 0)
    return "--kv-heads " + std::to_string(kvHeads) +
           " does not divide --heads " + std::to_string(heads) +
           " (each key/value head serves a whole group of query heads)";
  if ((embd / heads) % 2 != 0)
    return "rotary embeddings pair the halves of each head: the head width " +
           std::to_string(embd / heads) + " (--embd / --heads) is odd";
  if (!(ropeTheta > 0.0))
    return "--rope-theta must be positive";
  if (!(normEps > 0.0))
    return "--norm-eps must be positive";
  if (seq > ctx)
    return "--seq " + std::to_string(seq) +
           " exceeds the context generation caches (--ctx " +
           std::to_string(ctx) + ")";
  // The largest tensors of the step, in bytes of fp32 (sizes, strides and
  // parameter counts downstream are int64).
  const std::pair<const char *, std::vector<int64_t>> tensors[] = {
      {"the token embedding [vocab, embd]", {vocab, embd}},
      {"an MLP weight [ffn, embd]", {ffn, embd}},
      {"the logits [batch, seq, vocab]", {batch, seq, vocab}},
      {"the MLP activations [batch, seq, ffn]", {batch, seq, ffn}},
      {"the attention scores [batch, heads, seq, seq]",
       {batch, heads, seq, seq}},
      {"the caches [layers, batch, kv-heads, ctx, head width]",
       {layers, batch, kvHeads, ctx, embd / heads}},
  };
  for (const auto &[what, dims] : tensors) {
    int64_t bytes = 4;
    for (int64_t d : dims)
      if (__builtin_mul_overflow(bytes, d, &bytes))
        return std::string(what) + " would hold more than 2^63 bytes";
  }
  // Every layer's q, k, v, o, gate, up and down weights together.
  const __int128 kvWidth = static_cast<__int128>(kvHeads) * (embd / heads);
  const __int128 layerWeights =
      static_cast<__int128>(embd) * (2 * embd + 2 * kvWidth + 3 * ffn);
  if (4 * layerWeights > INT64_MAX || 4 * layerWeights * layers > INT64_MAX)
    return "the layers' weights would hold more than 2^63 bytes";
  return "";
}

llvm::SmallVector<ParameterSpec>
megatron::getParameterSpecs(const LlamaConfig &config) {
  const int64_t c = config.embd, kv = config.kvHeads * (c / config.heads);
  // Hugging Face's initialisation: every weight normal(0, 0.02)
  // (initializer_range), RMS norm gains 1.
  auto weight = [](std::string name, llvm::SmallVector<int64_t, 2> shape) {
    return ParameterSpec::normal(std::move(name), std::move(shape), 0.02);
  };
  auto gain = [c](std::string name) {
    return ParameterSpec::constant(std::move(name), {c}, 1.0);
  };
  llvm::SmallVector<ParameterSpec> specs = {
      weight("model.embed_tokens.weight", {config.vocab, c})};
  for (int64_t layer = 0; layer < config.layers; ++layer) {
    std::string p = "model.layers." + std::to_string(layer) + ".";
    // nn.Linear's layout: [out, in].
    llvm::SmallVector<ParameterSpec> block = {
        weight(p + "self_attn.q_proj.weight", {c, c}),
        weight(p + "self_attn.k_proj.weight", {kv, c}),
        weight(p + "self_attn.v_proj.weight", {kv, c}),
        weight(p + "self_attn.o_proj.weight", {c, c}),
        weight(p + "mlp.gate_proj.weight", {config.ffn, c}),
        weight(p + "mlp.up_proj.weight", {config.ffn, c}),
        weight(p + "mlp.down_proj.weight", {c, config.ffn}),
        gain(p + "input_layernorm.weight"),
        gain(p + "post_attention_layernorm.weight")};
    for (ParameterSpec &spec : block)
      spec.layer = layer;
    specs.append(block.begin(), block.end());
  }
  specs.append({gain("model.norm.weight"),
                weight("lm_head.weight", {config.vocab, c})});
  return specs;
}

int64_t megatron::countParameters(const LlamaConfig &config) {
  return countParameters(getParameterSpecs(config));
}

namespace {

/// Llama's forward pass; each op is located at the Hugging Face module it
/// comes from ("model.layers.3.mlp").
class LlamaEmitter final : public TransformerEmitter {
public:
  LlamaEmitter(OpBuilder &builder, const LlamaConfig &config,
               llvm::StringMap<Value> params)
      : TransformerEmitter(builder, std::move(params), config.batch,
                           config.seq),
        config(config) {
    dropoutRate = config.dropout;
  }

  Value forwardLoss(Value ids, Value targets) override {
    Value logits = lmHead(rmsNorm(blocks(embed(ids)), "model.norm"));
    return tp::CrossEntropyOp::create(
        b, at("loss"), RankedTensorType::get({}, b.getF32Type()), logits,
        targets, config.vocab);
  }

  Value generate(Value ids, KVCache &state, Value last) override {
    cache = &state;
    Value x = rmsNorm(blocks(embed(ids)), "model.norm");
    Value h = takePosition(x, last, "model.norm");
    cache = nullptr;
    return lmHead(h);
  }

private:
  int64_t headWidth() const { return config.embd / config.heads; }

  Value embed(Value ids) {
    return tp::EmbeddingOp::create(b, at("model.embed_tokens"),
                                   activation(config.embd),
                                   param("model.embed_tokens.weight"), ids,
                                   /*offset=*/Value());
  }

  Value blocks(Value x) {
    return layers(x, config.layers, "model.layers.",
                  [&](Value x, const std::string &p) { return block(x, p); });
  }

  /// An LM head of its own: logits = x * lm_head^T.
  Value lmHead(Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape.back() = config.vocab;
    return tp::MatmulOp::create(b, at("lm_head"), type.clone(shape), x,
                                param("lm_head.weight"),
                                /*transpose_lhs=*/false,
                                /*transpose_rhs=*/true);
  }

  Value rmsNorm(Value x, const std::string &prefix) {
    return tp::RMSNormOp::create(
        b, at(prefix), x, param(prefix + ".weight"),
        b.getF32FloatAttr(static_cast<float>(config.normEps)));
  }

  /// x * W^T for an nn.Linear `prefix` ([width, in]), no bias.
  Value linear(Value x, const std::string &prefix, int64_t width) {
    return tp::MatmulOp::create(b, at(prefix), activation(width), x,
                                param(prefix + ".weight"),
                                /*transpose_lhs=*/false,
                                /*transpose_rhs=*/true);
  }

  /// The rotary embedding of `heads` heads, at the chunk's positions when
  /// generating.
  Value rope(Value x, int64_t heads, const std::string &module) {
    return tp::RoPEOp::create(
        b, at(module), x.getType(), x, cache ? cache->positions : Value(),
        b.getI64IntegerAttr(heads), b.getF64FloatAttr(config.ropeTheta),
        UnitAttr());
  }

  Value attention(Value h, const std::string &p) {
    const std::string module = p + ".self_attn";
    const int64_t kvWidth = config.kvHeads * headWidth();
    Value q = rope(linear(h, module + ".q_proj", config.embd), config.heads,
                   module);
    Value k = rope(linear(h, module + ".k_proj", kvWidth), config.kvHeads,
                   module);
    Value v = linear(h, module + ".v_proj", kvWidth);
    auto kvHeads = b.getI64IntegerAttr(config.kvHeads);
    if (!cache)
      return selfAttention({q, k, v}, config.heads, kvHeads, module);
    auto store = [&](Value chunk, Value into) -> Value {
      return tp::KVCacheStoreOp::create(b, at(module), chunk, into,
                                        cache->positions, *currentLayer,
                                        /*section=*/tp::CacheSectionAttr(),
                                        config.kvHeads);
    };
    cache->keys = store(k, cache->keys);
    cache->values = store(v, cache->values);
    return tp::CachedAttentionOp::create(
        b, at(module), activation(config.embd), q, cache->keys, cache->values,
        cache->positions, *currentLayer, config.heads, kvHeads);
  }

  Value block(Value x, const std::string &p) {
    Value a = attention(rmsNorm(x, p + ".input_layernorm"), p);
    Value o = dropout(linear(a, p + ".self_attn.o_proj", config.embd),
                      DropoutSite::AttentionOutput, p + ".self_attn");
    x = tp::AddOp::create(b, at(p + ".self_attn"), x, o);
    Value h = rmsNorm(x, p + ".post_attention_layernorm");
    Value gate = linear(h, p + ".mlp.gate_proj", config.ffn);
    Value up = linear(h, p + ".mlp.up_proj", config.ffn);
    Value act = tp::SwiGLUOp::create(b, at(p + ".mlp"), gate, up);
    Value down = dropout(linear(act, p + ".mlp.down_proj", config.embd),
                         DropoutSite::MLPOutput, p + ".mlp");
    return tp::AddOp::create(b, at(p + ".mlp"), x, down);
  }

  const LlamaConfig &config;
};

ModelSignature signature(const LlamaConfig &config) {
  return {"llama",        MGT_CHECKPOINT_NAMES_HF_LLAMA,
          config.batch,   config.seq,
          config.vocab,   config.layers,
          config.kvHeads, config.ctx,
          config.embd / config.heads};
}

} // namespace

OwningOpRef<ModuleOp> megatron::buildLlamaModule(MLIRContext &context,
                                                 const LlamaConfig &config) {
  return buildFamilyModule<LlamaEmitter>(context, config, signature(config),
                                         ModuleKind::Training);
}

OwningOpRef<ModuleOp>
megatron::buildLlamaGenerationModule(MLIRContext &context,
                                     const LlamaConfig &config) {
  return buildFamilyModule<LlamaEmitter>(context, config, signature(config),
                                         ModuleKind::Generation);
}
