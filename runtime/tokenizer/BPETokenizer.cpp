#include "FileIO.h"
#include "PreTokenize.h"
#include "Tokenizer.h"
#include "Utf8.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <algorithm>
#include <climits>
#include <functional>
#include <queue>
#include <stdexcept>

namespace mtok {

namespace {

// bytes_to_unicode() of encoder.py: the printable bytes ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves, the other 68 for U+0100.. in byte order
// (space is 'Ġ' U+0120, newline 'Ċ' U+010A), so that every token is
// printable text in vocab.json and merges.txt.
class ByteSymbols {
public:
  ByteSymbols() {
    byteOf_.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      symbol_[b] = printable ? static_cast<char32_t>(b) : next++;
      byteOf_[symbol_[b]] = b;
    }
  }
  char32_t symbol(unsigned char b) const { return symbol_[b]; }
  // The byte that symbol stands for, or -1.
  int byteOf(char32_t symbol) const {
    return symbol < byteOf_.size() ? byteOf_[symbol] : -1;
  }

private:
  std::array<char32_t, 256> symbol_;
  std::array<int, 256 + 68> byteOf_;
};

const ByteSymbols &byteSymbols() {
  static const ByteSymbols table;
  return table;
}

std::string symbolText(unsigned char b) {
  std::string text;
  appendUtf8(byteSymbols().symbol(b), text);
  return text;
}

std::string formatHex(unsigned value, const char *format) {
  char text[16];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

using Fail = std::function<void(const std::string &)>; // throws

// The bytes a vocab.json token stands for; fails on a character that is
// not one of the 256 byte symbols.
std::string tokenBytesOf(const std::string &token, const Fail &fail) {
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    const DecodedChar c = decodeUtf8(token, pos);
    const int b = byteSymbols().byteOf(c.codePoint);
    if (b < 0)
      fail("token \"" + token + "\" contains " +
           (c.codePoint == kInvalidByte ? std::string("invalid UTF-8")
                                        : formatHex(c.codePoint, "U+%04X")) +
           ", which is not one of GPT-2's 256 byte symbols "
           "(bytes_to_unicode)");
    bytes += static_cast<char>(b);
    pos += c.length;
  }
  return bytes;
}

// nlohmann's messages begin "[json.exception.parse_error.101] ".
std::string withoutExceptionId(const std::string &what) {
  const size_t end = what.find("] ");
  return what.rfind("[json.exception.", 0) == 0 && end != std::string::npos
             ? what.substr(end + 2)
             : what;
}

uint64_t pairKey(int32_t left, int32_t right) {
  return (uint64_t{static_cast<uint32_t>(left)} << 32) |
         static_cast<uint32_t>(right);
}

using Vocab = std::unordered_map<std::string, int32_t>;
using detail::BPETables;

nlohmann::json parseJson(const std::string &what, const std::string &path,
                         const Fail &fail) {
  try {
    return nlohmann::json::parse(mfile::readFileBytes(what, path));
  } catch (const nlohmann::json::parse_error &e) {
    fail("malformed JSON: " + withoutExceptionId(e.what()));
  }
  return {};
}

// A vocabulary (token -> id, the ids 0..N-1, a token for each of the 256
// bytes) into t's tokens; returns token -> id, for the merges.
Vocab loadVocab(const nlohmann::json &json, BPETables &t, const Fail &fail) {
  if (!json.is_object())
    fail("expected a JSON object of token -> id, not " +
         std::string(json.type_name()));
  // N tokens with distinct ids in 0..N-1 have every id of the vocabulary.
  const int64_t size = static_cast<int64_t>(json.size());
  std::vector<std::string> tokenOfId(json.size());
  t.tokenBytes.resize(json.size());
  Vocab ids;
  for (const auto &item : json.items()) {
    const std::string &token = item.key();
    if (!item.value().is_number_integer())
      fail("token \"" + token + "\" has id " + item.value().dump() +
           ", not an integer");
    const int64_t id = item.value().get<int64_t>();
    if (id < 0 || id >= size)
      fail("token \"" + token + "\" has id " + std::to_string(id) +
           ", outside 0.." + std::to_string(size - 1) + " (the ids of " +
           std::to_string(size) + " tokens are 0..N-1)");
    if (token.empty())
      fail("the empty token \"\" (id " + std::to_string(id) + ")");
    if (!tokenOfId[id].empty())
      fail("id " + std::to_string(id) + " is given to both \"" + tokenOfId[id] +
           "\" and \"" + token + "\"");
    tokenOfId[id] = token;
    t.tokenBytes[id] = tokenBytesOf(token, fail);
    ids.emplace(token, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = ids.find(symbolText(b));
    if (it == ids.end())
      fail("no token for byte " + formatHex(b, "0x%02X") + " (its symbol \"" +
           symbolText(b) +
           "\"): the vocabulary needs all 256, so that any text encodes");
    t.byteTokens[b] = it->second;
  }
  return ids;
}

// The merge of tokens left and right at the next rank; fails naming a token
// not in the vocabulary (`vocabName`). Returns the rank of an earlier equal
// merge, or -1.
int32_t addMerge(const std::string &left, const std::string &right,
                 const Vocab &vocab, const std::string &vocabName,
                 BPETables &t, const Fail &fail) {
  const auto idOf = [&](const std::string &token, const std::string &what) {
    const auto it = vocab.find(token);
    if (it == vocab.end())
      fail(what + "\"" + token + "\" is not in " + vocabName);
    return it->second;
  };
  const int32_t leftId = idOf(left, ""), rightId = idOf(right, "");
  const int32_t result = idOf(left + right, "its result ");
  const int32_t rank = static_cast<int32_t>(t.merges.size());
  const auto [it, added] = t.merges.emplace(pairKey(leftId, rightId),
                                            BPETables::Merge{rank, result});
  return added ? -1 : it->second.rank;
}

void loadMergesText(const std::string &path, const std::string &vocabPath,
                    const Vocab &vocab, BPETables &t) {
  const std::string text = mfile::readFileBytes("merges", path);
  int lineNumber = 0; // of the line being read, from 1
  const Fail fail = [&](const std::string &what) {
    throw std::runtime_error("merges " + path + ":" +
                             std::to_string(lineNumber) + ": " + what);
  };
  std::vector<int> lineOfRank;
  for (size_t start = 0; start < text.size();) {
    ++lineNumber;
    size_t end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r')
      line.pop_back(); // a file written on Windows
    if (lineNumber == 1 && line.rfind("#version", 0) == 0)
      continue;
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      fail("expected a merge \"a b\" (two tokens, one space), got \"" + line +
           "\"");
    const int32_t earlier =
        addMerge(line.substr(0, space), line.substr(space + 1), vocab,
                 "vocab " + vocabPath, t, fail);
    if (earlier >= 0)
      fail("the merge \"" + line + "\" is also on line " +
           std::to_string(lineOfRank[earlier]));
    lineOfRank.push_back(lineNumber);
  }
}

// tokenizer.json's model.merges: "a b" strings, or [a, b] pairs.
void loadMergesJson(const nlohmann::json &merges, const Vocab &vocab,
                    BPETables &t, const Fail &fail) {
  if (!merges.is_array())
    fail("model.merges is not an array");
  for (size_t i = 0; i < merges.size(); ++i) {
    const nlohmann::json &merge = merges[i];
    const std::string where = "model.merges[" + std::to_string(i) + "] ";
    std::string left, right;
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space == 0 || space == std::string::npos ||
          space + 1 == text.size() || text.find(' ', space + 1) != std::string::npos)
        fail(where + "is not \"a b\" (two tokens, one space): " + merge.dump());
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      fail(where + "is neither \"a b\" nor [\"a\", \"b\"]: " + merge.dump());
    }
    const int32_t earlier = addMerge(
        left, right, vocab, "model.vocab",
        t, [&](const std::string &what) { fail(where + what); });
    if (earlier >= 0)
      fail(where + "repeats model.merges[" + std::to_string(earlier) + "]");
  }
}

// The value of `key` in `object`, or null when absent.
nlohmann::json field(const nlohmann::json &object, const char *key) {
  const auto it = object.find(key);
  return it == object.end() ? nlohmann::json() : *it;
}

bool isFalseOrAbsent(const nlohmann::json &value) {
  return value.is_null() || (value.is_boolean() && !value.get<bool>());
}

bool isNullOrEmpty(const nlohmann::json &value) {
  return value.is_null() ||
         (value.is_string() && value.get<std::string>().empty());
}

// A ByteLevel pre-tokeniser without a prefix space, with its own (GPT-2's)
// regex or none.
bool isByteLevel(const nlohmann::json &p, bool useRegex) {
  const nlohmann::json regex = field(p, "use_regex");
  return p.is_object() && field(p, "type") == "ByteLevel" &&
         isFalseOrAbsent(field(p, "add_prefix_space")) &&
         (regex.is_null() ? useRegex : regex == useRegex);
}

// GPT-2's ByteLevel, or Llama 3's Split on its pattern then ByteLevel.
PreTokenization preTokenization(const nlohmann::json &p, const Fail &fail) {
  if (isByteLevel(p, /*useRegex=*/true))
    return PreTokenization::GPT2;
  if (p.is_object() && field(p, "type") == "Sequence") {
    const nlohmann::json steps = field(p, "pretokenizers");
    if (steps.is_array() && steps.size() == 2) {
      const nlohmann::json &split = steps[0];
      if (split.is_object() && field(split, "type") == "Split" &&
          field(field(split, "pattern"), "Regex") ==
              std::string(kLlama3Pattern) &&
          field(split, "behavior") == "Isolated" &&
          isFalseOrAbsent(field(split, "invert")) &&
          isByteLevel(steps[1], /*useRegex=*/false))
        return PreTokenization::Llama3;
    }
  }
  fail("pre_tokenizer " + p.dump() +
       " is not supported (known: GPT-2's ByteLevel with its regex, and "
       "Llama 3's Split on its regex followed by ByteLevel)");
  return PreTokenization::GPT2;
}

// The model's BPE options that byte-level BPE has no use for must be off.
void checkModel(const nlohmann::json &model, const Fail &fail) {
  if (!model.is_object() || field(model, "type") != "BPE")
    fail("model " + field(model, "type").dump() +
         " is not supported (only BPE)");
  for (const char *key : {"dropout", "unk_token"})
    if (!field(model, key).is_null())
      fail(std::string("model.") + key + " " + field(model, key).dump() +
           " is not supported (byte-level BPE has none)");
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!isNullOrEmpty(field(model, key)))
      fail(std::string("model.") + key + " " + field(model, key).dump() +
           " is not supported (byte-level BPE has none)");
  for (const char *key : {"fuse_unk", "byte_fallback"})
    if (!isFalseOrAbsent(field(model, key)))
      fail(std::string("model.") + key + " is not supported");
}

// tokenizer.json's added_tokens: each recognised in the text as one token,
// its id in the vocabulary (the same text) or past it.
void loadAddedTokens(const nlohmann::json &added, BPETables &t,
                     const Fail &fail) {
  if (added.is_null())
    return;
  if (!added.is_array())
    fail("added_tokens is not an array");
  const size_t modelSize = t.tokenBytes.size();
  for (size_t i = 0; i < added.size(); ++i) {
    const nlohmann::json &token = added[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "] ";
    if (!token.is_object() || !field(token, "id").is_number_integer() ||
        !field(token, "content").is_string() ||
        field(token, "content").get<std::string>().empty())
      fail(where + "needs an integer id and a non-empty content: " +
           token.dump());
    for (const char *key : {"single_word", "lstrip", "rstrip"})
      if (!isFalseOrAbsent(field(token, key)))
        fail(where + key + " is not supported");
    const int64_t id = field(token, "id").get<int64_t>();
    const std::string content = field(token, "content").get<std::string>();
    if (id < 0 || id > INT32_MAX)
      fail(where + "has id " + std::to_string(id));
    if (static_cast<size_t>(id) < modelSize) {
      if (t.tokenBytes[id] != content)
        fail(where + "\"" + content + "\" has id " + std::to_string(id) +
             ", which model.vocab gives to other bytes");
    } else {
      if (static_cast<size_t>(id) >= t.tokenBytes.size())
        t.tokenBytes.resize(id + 1);
      if (!t.tokenBytes[id].empty())
        fail(where + "has the id " + std::to_string(id) +
             " of another added token");
      t.tokenBytes[id] = content;
    }
    t.added.emplace_back(content, static_cast<int32_t>(id));
  }
  for (size_t id = modelSize; id < t.tokenBytes.size(); ++id)
    if (t.tokenBytes[id].empty())
      fail("no token has id " + std::to_string(id) + " (the ids are 0.." +
           std::to_string(t.tokenBytes.size() - 1) +
           ", model.vocab's and added_tokens')");
  // Longest first: at one place the longest added token wins.
  std::stable_sort(t.added.begin(), t.added.end(),
                   [](const auto &a, const auto &b) {
                     return a.first.size() > b.first.size();
                   });
}

} // namespace

std::unique_ptr<BPETokenizer>
BPETokenizer::fromGPT2Files(const std::string &vocabPath,
                            const std::string &mergesPath) {
  const Fail fail = [&](const std::string &what) {
    throw std::runtime_error("vocab " + vocabPath + ": " + what);
  };
  BPETables t;
  const Vocab vocab = loadVocab(parseJson("vocab", vocabPath, fail), t, fail);
  loadMergesText(mergesPath, vocabPath, vocab, t);
  return std::make_unique<BPETokenizer>(std::move(t));
}

std::unique_ptr<BPETokenizer>
BPETokenizer::fromTokenizerJson(const std::string &path) {
  const Fail fail = [&](const std::string &what) {
    throw std::runtime_error("tokenizer.json " + path + ": " + what);
  };
  const nlohmann::json json = parseJson("tokenizer.json", path, fail);
  if (!json.is_object())
    fail("expected a JSON object, not " + std::string(json.type_name()));
  if (!field(json, "normalizer").is_null())
    fail("normalizer " + field(json, "normalizer").dump() +
         " is not supported (byte-level BPE takes the text as it is)");
  const nlohmann::json model = field(json, "model");
  checkModel(model, fail);
  BPETables t;
  t.pattern = preTokenization(field(json, "pre_tokenizer"), fail);
  const Vocab vocab = loadVocab(
      field(model, "vocab"), t,
      [&](const std::string &what) { fail("model.vocab: " + what); });
  loadMergesJson(field(model, "merges"), vocab, t, fail);
  const nlohmann::json ignore = field(model, "ignore_merges");
  t.ignoreMerges = ignore.is_boolean() && ignore.get<bool>();
  if (t.ignoreMerges)
    for (const auto &[token, id] : vocab)
      t.pieceIds.emplace(t.tokenBytes[id], id);
  loadAddedTokens(field(json, "added_tokens"), t, fail);
  return std::make_unique<BPETokenizer>(std::move(t));
}

std::vector<int32_t> BPETokenizer::encode(const std::string &text) const {
  std::vector<int32_t> ids;
  const std::string_view all(text);
  // The added tokens cut the text; the pieces between go through BPE.
  std::array<bool, 256> firstBytes{};
  for (const auto &[content, id] : t_.added)
    firstBytes[static_cast<unsigned char>(content[0])] = true;
  size_t start = 0;
  for (size_t pos = 0; pos < all.size() && !t_.added.empty(); ++pos) {
    if (!firstBytes[static_cast<unsigned char>(all[pos])])
      continue;
    for (const auto &[content, id] : t_.added)
      if (all.compare(pos, content.size(), content) == 0) {
        encodePieces(all.substr(start, pos - start), ids);
        ids.push_back(id);
        start = pos + content.size();
        pos = start - 1;
        break;
      }
  }
  encodePieces(all.substr(start), ids);
  return ids;
}

void BPETokenizer::encodePieces(std::string_view text,
                                std::vector<int32_t> &ids) const {
  // Words recur: each distinct piece goes through BPE once per call (a
  // cache local to the call keeps encode() thread-safe).
  std::unordered_map<std::string_view, std::vector<int32_t>> known;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = preTokenEnd(t_.pattern, text, pos);
    const auto [it, isNew] = known.try_emplace(text.substr(pos, end - pos));
    if (isNew)
      it->second = bpe(it->first);
    ids.insert(ids.end(), it->second.begin(), it->second.end());
    pos = end;
  }
}

// encoder.py's bpe(): while some adjacent pair has a merge, take the pair
// of the lowest rank and merge its every occurrence, left to right without
// overlaps. Here in O(n log n) rather than the reference's O(n^2), as one
// piece may be long (a line of '='): a linked list of symbols and a heap of
// candidate pairs by (rank, position). A merge makes pairs of other ranks
// only (ab is neither a nor b), so a round takes every candidate of the
// lowest rank off the heap before it merges any; the pairs its merges make
// wait for a later round, as in the reference.
std::vector<int32_t> BPETokenizer::bpe(std::string_view piece) const {
  if (t_.ignoreMerges)
    if (const auto it = t_.pieceIds.find(std::string(piece));
        it != t_.pieceIds.end())
      return {it->second};
  struct Symbol {
    int32_t id;         // -1: merged into its left neighbour
    int32_t prev, next; // positions, -1 past the ends
  };
  struct Candidate {
    int32_t rank, left, leftId, rightId, result;
    bool operator>(const Candidate &o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  const int32_t n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i)
    symbols[i] = Symbol{t_.byteTokens[static_cast<unsigned char>(piece[i])],
                        i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto consider = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0)
      return;
    const int32_t leftId = symbols[left].id,
                  rightId = symbols[symbols[left].next].id;
    const auto it = t_.merges.find(pairKey(leftId, rightId));
    if (it != t_.merges.end())
      heap.push(
          Candidate{it->second.rank, left, leftId, rightId, it->second.result});
  };
  // A candidate is stale once either symbol has grown or gone.
  const auto isCurrent = [&](const Candidate &c) {
    const Symbol &left = symbols[c.left];
    return left.id == c.leftId && left.next >= 0 &&
           symbols[left.next].id == c.rightId;
  };
  const auto merge = [&](const Candidate &c) {
    Symbol &l = symbols[c.left];
    Symbol &r = symbols[l.next];
    l.id = c.result;
    r.id = -1;
    l.next = r.next;
    if (l.next >= 0)
      symbols[l.next].prev = c.left;
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    consider(i);
  std::vector<Candidate> round;
  while (!heap.empty()) {
    round.clear();
    for (const int32_t rank = heap.top().rank;
         !heap.empty() && heap.top().rank == rank; heap.pop())
      round.push_back(heap.top()); // left to right: the heap's order
    for (const Candidate &c : round) {
      if (!isCurrent(c))
        continue;
      merge(c);
      consider(symbols[c.left].prev);
      consider(c.left);
    }
  }
  std::vector<int32_t> ids;
  for (int32_t i = 0; i >= 0; i = symbols[i].next)
    ids.push_back(symbols[i].id);
  return ids;
}

} // namespace mtok
