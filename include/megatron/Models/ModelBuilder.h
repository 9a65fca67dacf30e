//===- ModelBuilder.h - what every model generator shares ------*- C++ -*-===//
//
// A model family is one file of its layer structure: a config, its
// parameters (ParameterSpec, in its checkpoints' state-dict order) and a
// TransformerEmitter that writes one forward pass from the tp ops. This
// header gives it the rest: the functions at global shapes with every
// argument's name, role, init and layer stated (buildTrainingModule,
// buildGenerationModule), the location of each op in its #tp.layer, and the
// KV cache generation threads through the layers.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_MODELS_MODELBUILDER_H
#define MEGATRON_MODELS_MODELBUILDER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <optional>
#include <string>

namespace mlir::megatron {

/// A model parameter: its checkpoint name, global shape, initialisation and
/// the layer it belongs to.
struct ParameterSpec {
  enum class Init { Normal, Constant };
  std::string name;
  llvm::SmallVector<int64_t, 2> shape;
  /// normal(0, initValue) or every element initValue.
  Init init = Init::Normal;
  double initValue = 0.02;
  std::optional<int64_t> layer;
  int64_t numElements() const;

  static ParameterSpec normal(std::string name,
                              llvm::SmallVector<int64_t, 2> shape,
                              double std);
  static ParameterSpec constant(std::string name,
                                llvm::SmallVector<int64_t, 2> shape,
                                double value);
};

/// The elements of all of `specs`.
int64_t countParameters(llvm::ArrayRef<ParameterSpec> specs);

/// Why `rate` cannot be a dropout probability (outside [0, 1)), or "".
std::string validateDropout(double rate);

/// What the functions of a model take beside its parameters, and the names
/// they carry.
struct ModelSignature {
  /// The training function's name (`@gpt2`); generation's decode entry
  /// takes it too, prefill `@<name>_prefill`.
  std::string name;
  /// The checkpoint naming scheme (MGT_CHECKPOINT_NAMES_*) stated on every
  /// function, so that the family's published checkpoints load.
  std::string checkpointNames;
  int64_t batch, seq, vocab;
  /// Generation's caches: [layers, batch, cacheHeads, ctx, headWidth].
  int64_t layers, cacheHeads, ctx, headWidth;
};

/// Generation's state, threaded through the layers: the chunk each
/// sequence adds, where it starts, and the caches as each layer leaves them.
struct KVCache {
  int64_t chunk;
  Value positions, keys, values;
};

/// Writes one forward pass of a family at global shapes. A family
/// subclasses it with its blocks; the base locates each op and sizes the
/// activations of the chunk being emitted.
class TransformerEmitter {
public:
  TransformerEmitter(OpBuilder &builder, llvm::StringMap<Value> params,
                     int64_t batch, int64_t seq)
      : b(builder), params(std::move(params)), batch(batch), seq(seq) {}
  virtual ~TransformerEmitter();

  /// The mean cross-entropy ([]) of the next-token prediction of `ids`
  /// ([B, T]) against `targets`.
  virtual Value forwardLoss(Value ids, Value targets) = 0;
  /// Generation's step on a chunk of `ids` ([B, chunk]) at `cache`'s
  /// positions: fills the caches and returns the logits ([B, V]) of each
  /// sequence's column `last`.
  virtual Value generate(Value ids, KVCache &cache, Value last) = 0;

protected:
  /// A module's location (its checkpoint prefix, "h.3.mlp"), within the
  /// current layer's #tp.layer when in one.
  Location at(const std::string &name);
  Value param(const std::string &name) const { return params.lookup(name); }
  /// [B, T, width] for the T tokens of each sequence being emitted.
  RankedTensorType activation(int64_t width);
  /// The tokens per sequence of the pass: the training sequence, or the
  /// generation chunk.
  int64_t chunk() const { return cache ? cache->chunk : seq; }
  /// `count` blocks `block(x, "<prefix><i>")` in turn, each in its
  /// #tp.layer.
  Value layers(Value x, int64_t count, const std::string &prefix,
               llvm::function_ref<Value(Value, const std::string &)> block);
  /// Generation's last step: each sequence's activation at column `last`,
  /// [B, width].
  Value takePosition(Value x, Value last, const std::string &module);

  /// Where a training step's dropout sits. A site's mask stream is (layer +
  /// 1) * kDropoutSites + site, the embedding's outside any layer, so every
  /// site of the model draws its own masks.
  enum class DropoutSite : int64_t {
    Probabilities,   // attention's, after the softmax
    AttentionOutput, // the attention block's output, before the residual add
    MLPOutput,       // the MLP's output, before the residual add
    Embedding,       // the embedded tokens (and positions)
  };
  static constexpr int64_t kDropoutSites = 4;
  /// `x` dropped at `site` by a tp.dropout located at `module` when the
  /// step trains with a dropout rate; `x` itself otherwise (and generating).
  Value dropout(Value x, DropoutSite site, const std::string &module);
  /// Causal self-attention over the training chunk of `inputs` (a fused
  /// qkv, or q, k and v), its probabilities dropped at the dropout rate.
  Value selfAttention(ValueRange inputs, int64_t heads, IntegerAttr kvHeads,
                      const std::string &module);

  OpBuilder &b;
  llvm::StringMap<Value> params;
  int64_t batch, seq;
  std::optional<int64_t> currentLayer;
  KVCache *cache = nullptr; // while emitting a generation step
  /// The training step's dropout probability (the family's config sets it).
  double dropoutRate = 0.0;

private:
  /// The current layer's stream of `site`: a constant at the function's
  /// start, outside every layer, so the layers stay equal but for it.
  Value dropoutStream(DropoutSite site);
};

/// A family's emitter writing with `b` over the function's parameters (by
/// name).
using EmitterFactory = llvm::function_ref<std::unique_ptr<TransformerEmitter>(
    OpBuilder &b, llvm::StringMap<Value> params)>;

/// `func.func @<name>(params..., input_ids, targets) -> loss` at global
/// shapes, every argument's role, init and layer stated in the IR.
OwningOpRef<ModuleOp> buildTrainingModule(MLIRContext &context,
                                          const ModelSignature &signature,
                                          llvm::ArrayRef<ParameterSpec> specs,
                                          EmitterFactory emitter);

/// The generation program at global shapes: `@<name>_prefill` on chunks of
/// `seq` prompt tokens and `@<name>` (decode) on one new token per sequence,
/// each at per-sequence positions, both filling the KV caches in place and
/// writing the [batch, vocab] logits of one column per sequence. The
/// parameters are the training module's, so its checkpoints load.
OwningOpRef<ModuleOp> buildGenerationModule(MLIRContext &context,
                                            const ModelSignature &signature,
                                            llvm::ArrayRef<ParameterSpec> specs,
                                            EmitterFactory emitter);

/// What a module holds: a training step, or the generation program.
enum class ModuleKind { Training, Generation };

/// A family's module: its parameters (getParameterSpecs(config), found by
/// argument-dependent lookup) and its forward pass, an `Emitter(OpBuilder &,
/// const Config &, llvm::StringMap<Value> params)`.
template <typename Emitter, typename Config>
OwningOpRef<ModuleOp> buildFamilyModule(MLIRContext &context,
                                        const Config &config,
                                        const ModelSignature &signature,
                                        ModuleKind kind) {
  auto emitter = [&](OpBuilder &b, llvm::StringMap<Value> params)
      -> std::unique_ptr<TransformerEmitter> {
    return std::make_unique<Emitter>(b, config, std::move(params));
  };
  llvm::SmallVector<ParameterSpec> specs = getParameterSpecs(config);
  return kind == ModuleKind::Training
             ? buildTrainingModule(context, signature, specs, emitter)
             : buildGenerationModule(context, signature, specs, emitter);
}

} // namespace mlir::megatron

#endif // MEGATRON_MODELS_MODELBUILDER_H
