// Tokenizers of the runtime: text to token ids and back, in C++ (no Python
// in the product). ByteTokenizer is what the main job trains on (one token
// per byte); BPETokenizer is byte-level BPE from a user's GPT-2 vocab.json
// and merges.txt or Hugging Face tokenizer.json. See README.md.
#ifndef MEGATRON_TOKENIZER_TOKENIZER_H
#define MEGATRON_TOKENIZER_TOKENIZER_H

#include "PreTokenize.h"

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

namespace detail {
// What byte-level BPE encodes with, as its files give it.
struct BPETables {
  struct Merge {
    int32_t rank;
    int32_t result; // the id of the merged token
  };
  std::vector<std::string> tokenBytes;   // id -> its bytes
  std::array<int32_t, 256> byteTokens{}; // byte -> its one-byte token
  // The merge of each (left id, right id) pair, keyed by pairKey().
  std::unordered_map<uint64_t, Merge> merges;
  PreTokenization pattern = PreTokenization::GPT2;
  // ignore_merges (Llama 3's): a piece that is a token is that token.
  bool ignoreMerges = false;
  std::unordered_map<std::string, int32_t> pieceIds; // bytes -> id
  // Added tokens recognised in the text (content bytes, id), longest first.
  std::vector<std::pair<std::string, int32_t>> added;
};
} // namespace detail

// Byte-level BPE (OpenAI's encoder.py for GPT-2; Hugging Face's tokenizers
// for the tokenizer.json files of Llama 3 and most current models):
// pre-tokenisation (PreTokenize.h), each piece's bytes as the symbols of
// bytes_to_unicode(), then merges by rank.
class BPETokenizer final : public Tokenizer {
public:
  // GPT-2's files. vocab.json: a JSON object of token (bytes_to_unicode
  // symbols) -> id, the ids 0..N-1, one token for each of the 256 bytes.
  // merges.txt: an optional "#version" line, then one "a b" merge a line in
  // rank order, a, b and ab in the vocabulary. Special tokens such as
  // <|endoftext|> are not recognised in the text, as in encoder.py; they
  // decode as their text. Throws naming the file (and line).
  static std::unique_ptr<BPETokenizer>
  fromGPT2Files(const std::string &vocabPath, const std::string &mergesPath);

  // A Hugging Face tokenizer.json of the byte-level BPE kind: a BPE model
  // (no dropout, unknown token, subword affixes or byte fallback;
  // ignore_merges honoured), no normaliser, and GPT-2's ByteLevel
  // pre-tokeniser or Llama 3's Split of kLlama3Pattern then ByteLevel. Its
  // added tokens are recognised in the text, the longest at the leftmost
  // place first, as the tokenizers library's encode does; no special tokens
  // are put around the text (its post-processor is not applied). Throws
  // naming the file and what it does not support.
  static std::unique_ptr<BPETokenizer>
  fromTokenizerJson(const std::string &path);

  explicit BPETokenizer(detail::BPETables tables) : t_(std::move(tables)) {}

  std::vector<int32_t> encode(const std::string &text) const override;
  int64_t vocabSize() const override {
    return static_cast<int64_t>(t_.tokenBytes.size());
  }

private:
  detail::BPETables t_;

  std::string tokenBytes(int32_t id) const override {
    return t_.tokenBytes[id];
  }
  // The tokens of text without added tokens.
  void encodePieces(std::string_view text, std::vector<int32_t> &ids) const;
  // The tokens of one pre-tokenised piece.
  std::vector<int32_t> bpe(std::string_view piece) const;
};

// Which tokenizer, and its files: "byte" (none), "gpt2" (vocab.json and
// merges.txt) or "hf" (a tokenizer.json).
struct TokenizerChoice {
  std::string kind = "byte";
  std::string vocab, merges, tokenizerJson;
};

// Throws for a kind other than "byte", "gpt2" or "hf", and for a kind
// given files it does not take or without those it needs: what
// makeTokenizer checks before it loads anything (a launcher reports these
// as usage errors).
void checkTokenizerChoice(const TokenizerChoice &choice);

// The tokenizer chosen.
std::unique_ptr<Tokenizer> makeTokenizer(const TokenizerChoice &choice);

} // namespace mtok

#endif // MEGATRON_TOKENIZER_TOKENIZER_H
