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

void checkTokenizerChoice(const std::string &kind, const std::string &vocab,
                          const std::string &merges) {
  if (kind == "byte") {
    if (!vocab.empty() || !merges.empty())
      throw std::runtime_error(
          "the byte tokenizer takes no vocab.json or merges.txt");
  } else if (kind == "gpt2") {
    if (vocab.empty() || merges.empty())
      throw std::runtime_error(
          "the gpt2 tokenizer needs both a vocab.json and a merges.txt");
  } else {
    throw std::runtime_error("unknown tokenizer \"" + kind +
                             "\" (expected byte or gpt2)");
  }
}

std::unique_ptr<Tokenizer> makeTokenizer(const std::string &kind,
                                         const std::string &vocab,
                                         const std::string &merges) {
  checkTokenizerChoice(kind, vocab, merges);
  if (kind == "byte")
    return std::make_unique<ByteTokenizer>();
  return std::make_unique<GPT2Tokenizer>(vocab, merges);
}

} // namespace mtok
