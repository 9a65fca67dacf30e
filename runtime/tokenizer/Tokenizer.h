// Tokenizers of the runtime: text to token ids and back, in C++ (no Python
// in the product). ByteTokenizer is what the main job trains on (one token
// per byte); GPT2Tokenizer is GPT-2's byte-level BPE from a user's
// vocab.json and merges.txt. See README.md.
#ifndef MEGATRON_TOKENIZER_TOKENIZER_H
#define MEGATRON_TOKENIZER_TOKENIZER_H

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mtok {

// Every error is a std::runtime_error naming the file, line or token id.
class Tokenizer {
public:
  virtual ~Tokenizer() = default;

  // Any byte string encodes (invalid UTF-8 included), and decode(encode(t))
  // == t.
  virtual std::vector<int32_t> encode(const std::string &text) const = 0;

  // The bytes of one token, for a caller that streams text as tokens come:
  // they may be part of a UTF-8 character that the next tokens complete.
  // Throws on an id outside [0, vocabSize()).
  std::string decodeToken(int32_t id) const;

  // The concatenated bytes of the tokens; throws naming the first id
  // outside the vocabulary and its position.
  std::string decode(const std::vector<int32_t> &ids) const;

  // Token ids are [0, vocabSize()).
  virtual int64_t vocabSize() const = 0;

private:
  // The bytes of token id, in range.
  virtual std::string tokenBytes(int32_t id) const = 0;
  bool inVocabulary(int32_t id) const;
  std::string outOfVocabulary(int32_t id) const;
};

// One token per byte: token b is byte b, vocabulary 256.
class ByteTokenizer final : public Tokenizer {
public:
  std::vector<int32_t> encode(const std::string &text) const override;
  int64_t vocabSize() const override { return 256; }

private:
  std::string tokenBytes(int32_t id) const override;
};

// GPT-2's byte-level BPE (OpenAI's encoder.py): pre-tokenisation
// (PreTokenize.h), each piece's bytes as the symbols of bytes_to_unicode(),
// then merges by rank. Special tokens such as <|endoftext|> are not
// recognised in the text, as in encoder.py; they decode as their text.
class GPT2Tokenizer final : public Tokenizer {
public:
  // vocab.json: a JSON object of token (bytes_to_unicode symbols) -> id,
  // the ids 0..N-1, one token for each of the 256 bytes. merges.txt: an
  // optional "#version" line, then one "a b" merge a line in rank order,
  // a, b and ab in the vocabulary. Throws naming the file (and line).
  GPT2Tokenizer(const std::string &vocabPath, const std::string &mergesPath);

  std::vector<int32_t> encode(const std::string &text) const override;
  int64_t vocabSize() const override {
    return static_cast<int64_t>(tokenBytes_.size());
  }

private:
  struct Merge {
    int32_t rank;
    int32_t result; // the id of the merged token
  };

  std::vector<std::string> tokenBytes_;   // id -> its bytes
  std::array<int32_t, 256> byteTokens_{}; // byte -> its one-byte token
  // The merge of each (left id, right id) pair, keyed by pairKey().
  std::unordered_map<uint64_t, Merge> merges_;

  std::string tokenBytes(int32_t id) const override { return tokenBytes_[id]; }
  // Reads vocab.json; returns its token -> id, for the merges.
  std::unordered_map<std::string, int32_t> loadVocab(const std::string &path);
  void loadMerges(const std::string &path, const std::string &vocabPath,
                  const std::unordered_map<std::string, int32_t> &vocab);
  // The tokens of one pre-tokenised piece.
  std::vector<int32_t> bpe(std::string_view piece) const;
};

// Throws for a kind other than "byte" or "gpt2", for gpt2 without both
// files, and for byte with either: what makeTokenizer checks before it
// loads anything (a launcher reports these as usage errors).
void checkTokenizerChoice(const std::string &kind, const std::string &vocab,
                          const std::string &merges);

// The tokenizer of that kind (vocab and merges: gpt2's files, else empty).
std::unique_ptr<Tokenizer> makeTokenizer(const std::string &kind,
                                         const std::string &vocab,
                                         const std::string &merges);

} // namespace mtok

#endif // MEGATRON_TOKENIZER_TOKENIZER_H
