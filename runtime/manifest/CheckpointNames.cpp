#include "CheckpointNames.h"

#include "megatron_rt/contract.h"

#include <regex>
#include <stdexcept>

namespace mrun {
namespace {

std::optional<std::string> asIs(const std::string &fileName) {
  return fileName;
}

// Hugging Face GPT-2: names with or without "transformer."; the attention
// masks (h.N.attn.bias, h.N.attn.masked_bias) are buffers, and lm_head.weight
// is the token embedding again (tied).
std::optional<std::string> huggingFaceGPT2(const std::string &fileName) {
  static const std::regex buffer(R"(^h\.\d+\.attn\.(bias|masked_bias)$)");
  std::string name = fileName;
  if (name.rfind("transformer.", 0) == 0)
    name = name.substr(12);
  if (std::regex_match(name, buffer) || name == "lm_head.weight")
    return std::nullopt;
  return name;
}

// Hugging Face Llama: the model's own names; older checkpoints keep each
// layer's rotary frequencies (self_attn.rotary_emb.inv_freq), a buffer the
// rotary embedding computes.
std::optional<std::string> huggingFaceLlama(const std::string &fileName) {
  static const std::regex buffer(
      R"(^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$)");
  if (std::regex_match(fileName, buffer))
    return std::nullopt;
  return fileName;
}

} // namespace

CheckpointNames checkpointNamesFor(const std::string &scheme) {
  if (scheme.empty())
    return asIs;
  if (scheme == MGT_CHECKPOINT_NAMES_HF_GPT2)
    return huggingFaceGPT2;
  if (scheme == MGT_CHECKPOINT_NAMES_HF_LLAMA)
    return huggingFaceLlama;
  throw std::invalid_argument(
      "unknown checkpoint names \"" + scheme +
      "\" (known: \"" MGT_CHECKPOINT_NAMES_HF_GPT2
      "\", \"" MGT_CHECKPOINT_NAMES_HF_LLAMA "\", or none for the model's own)");
}

} // namespace mrun
