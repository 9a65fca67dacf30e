//===- GPT2.h - GPT-2 configurations and the IR generator -------*- C++ -*-===//
#ifndef MEGATRON_MODELS_GPT2_H
#define MEGATRON_MODELS_GPT2_H

#include "megatron/Models/ModelBuilder.h"

#include <optional>
#include <string>

namespace mlir::megatron {

struct GPT2Config {
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t embd = 768;
  int64_t vocab = 50257;
  /// Rows of the position table (GPT-2's n_ctx).
  int64_t ctx = 1024;
  /// Sequence length and batch of the generated step (generating: the
  /// prompt chunk prefill takes, and the sequences generated at once).
  int64_t seq = 64;
  int64_t batch = 4;
  /// The training step's dropout probability: attention's probabilities
  /// and each block's outputs (and GPT-2's embeddings) while training.
  double dropout = 0.0;

  /// tiny, 124M, 350M, 774M or 1558M, or the Megatron-LM paper's Table 1
  /// configurations megatron-1.2B, megatron-2.5B, megatron-4.2B and
  /// megatron-8.3B.
  static std::optional<GPT2Config> fromPreset(llvm::StringRef name);

  /// Why this configuration cannot describe a GPT-2, or the empty string.
  std::string validate() const;
};

/// Every parameter in Hugging Face state-dict order (the LM head is tied to
/// wte and so has no entry of its own).
llvm::SmallVector<ParameterSpec> getParameterSpecs(const GPT2Config &config);

int64_t countParameters(const GPT2Config &config);

/// Builds `func.func @gpt2(params..., input_ids, targets) -> loss` at global
/// shapes, every argument's role, init and layer stated in the IR. The config must have been validated.
OwningOpRef<ModuleOp> buildGPT2Module(MLIRContext &context,
                                      const GPT2Config &config);

/// Builds GPT-2's generation program at global shapes: `@gpt2_prefill` on
/// chunks of `seq` prompt tokens and `@gpt2` (decode) on one new token per
/// sequence, each at per-sequence positions, both filling a KV cache of
/// [layers, batch, heads, ctx, head width] in place and writing the [batch,
/// vocab] logits of one column per sequence. The parameters are those of
/// buildGPT2Module, so its checkpoints load.
OwningOpRef<ModuleOp> buildGPT2GenerationModule(MLIRContext &context,
                                                const GPT2Config &config);

} // namespace mlir::megatron

#endif // MEGATRON_MODELS_GPT2_H
