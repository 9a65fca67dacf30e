#include "Tokenizer.h"

#include <stdexcept>

namespace mtok {

std::string Tokenizer::outOfVocabulary(int32_t id) const {
  return "token id " + std::to_string(id) +
         " is outside the vocabulary (ids 0.." +
         std::to_string(vocabSize() - 1) + ")";
}

bool Tokenizer::inVocabulary(int32_t id) const {
  return id >= 0 && id < vocabSize();
}

std::string Tokenizer::decodeToken(int32_t id) const {
  if (!inVocabulary(id))
    throw std::runtime_error(outOfVocabulary(id));
  return tokenBytes(id);
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!inVocabulary(ids[i]))
      throw std::runtime_error(outOfVocabulary(ids[i]) + " at position " +
                               std::to_string(i));
    text += tokenBytes(ids[i]);
  }
  return text;
}

void checkTokenizerChoice(const TokenizerChoice &choice) {
  const bool gpt2Files = !choice.vocab.empty() || !choice.merges.empty();
  const bool json = !choice.tokenizerJson.empty();
  if (choice.kind == "byte") {
    if (gpt2Files || json)
      throw std::runtime_error(
          "the byte tokenizer takes no vocab.json, merges.txt or "
          "tokenizer.json");
  } else if (choice.kind == "gpt2") {
    if (choice.vocab.empty() || choice.merges.empty())
      throw std::runtime_error(
          "the gpt2 tokenizer needs both a vocab.json and a merges.txt");
    if (json)
      throw std::runtime_error(
          "the gpt2 tokenizer takes vocab.json and merges.txt, not a "
          "tokenizer.json (that is --tokenizer hf)");
  } else if (choice.kind == "hf") {
    if (!json)
      throw std::runtime_error("the hf tokenizer needs a tokenizer.json");
    if (gpt2Files)
      throw std::runtime_error(
          "the hf tokenizer takes a tokenizer.json, not vocab.json or "
          "merges.txt (those are --tokenizer gpt2)");
  } else {
    throw std::runtime_error("unknown tokenizer \"" + choice.kind +
                             "\" (expected byte, gpt2 or hf)");
  }
}

std::unique_ptr<Tokenizer> makeTokenizer(const TokenizerChoice &choice) {
  checkTokenizerChoice(choice);
  if (choice.kind == "byte")
    return std::make_unique<ByteTokenizer>();
  if (choice.kind == "gpt2")
    return BPETokenizer::fromGPT2Files(choice.vocab, choice.merges);
  return BPETokenizer::fromTokenizerJson(choice.tokenizerJson);
}

} // namespace mtok
