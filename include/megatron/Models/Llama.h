//===- Llama.h - Llama configurations and the IR generator ------*- C++ -*-===//
#ifndef MEGATRON_MODELS_LLAMA_H
#define MEGATRON_MODELS_LLAMA_H

#include "megatron/Models/ModelBuilder.h"

#include <optional>
#include <string>

namespace mlir::megatron {

/// A Llama-shaped decoder (Llama 2 and 3, Mistral, Qwen): RMS norms, rotary
/// embeddings, grouped-query attention, a SwiGLU MLP, no biases, and an LM
/// head of its own.
struct LlamaConfig {
  int64_t layers = 32;
  int64_t heads = 32;
  /// Key/value heads: grouped-query attention when fewer than heads.
  int64_t kvHeads = 32;
  int64_t embd = 4096;
  /// The MLP's intermediate width (gate and up projections).
  int64_t ffn = 11008;
  int64_t vocab = 32000;
  /// The longest context generation caches (positions are rotary: no
  /// table bounds them in training).
  int64_t ctx = 4096;
  int64_t seq = 64;
  int64_t batch = 4;
  double ropeTheta = 10000.0;
  double normEps = 1e-5;
  /// The training step's dropout probability: attention's probabilities
  /// and each block's outputs (and GPT-2's embeddings) while training.
  double dropout = 0.0;

  /// tiny, llama2-7B, llama3-8B or llama3-70B.
  static std::optional<LlamaConfig> fromPreset(llvm::StringRef name);
  static llvm::StringRef presetNames();

  /// Why this configuration cannot describe a Llama, or the empty string.
  std::string validate() const;
};

/// Every parameter in Hugging Face state-dict order, with Hugging Face's
/// names and nn.Linear layouts ([out, in]).
llvm::SmallVector<ParameterSpec> getParameterSpecs(const LlamaConfig &config);

int64_t countParameters(const LlamaConfig &config);

/// `func.func @llama(params..., input_ids, targets) -> loss` at global
/// shapes. The config must have been validated.
OwningOpRef<ModuleOp> buildLlamaModule(MLIRContext &context,
                                       const LlamaConfig &config);

/// The generation program (prefill and decode over KV caches of kv_heads
/// heads), as buildGenerationModule describes it.
OwningOpRef<ModuleOp> buildLlamaGenerationModule(MLIRContext &context,
                                                 const LlamaConfig &config);

} // namespace mlir::megatron

#endif // MEGATRON_MODELS_LLAMA_H
