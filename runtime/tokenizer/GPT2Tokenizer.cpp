#include "FileIO.h"
#include "PreTokenize.h"
#include "Tokenizer.h"
#include "Utf8.h"

#include <nlohmann/json.hpp>

#include <cstdio>
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

} // namespace

GPT2Tokenizer::GPT2Tokenizer(const std::string &vocabPath,
                             const std::string &mergesPath) {
  loadMerges(mergesPath, vocabPath, loadVocab(vocabPath));
}

std::unordered_map<std::string, int32_t>
GPT2Tokenizer::loadVocab(const std::string &path) {
  const Fail fail = [&](const std::string &what) {
    throw std::runtime_error("vocab " + path + ": " + what);
  };
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(mfile::readFileBytes("vocab", path));
  } catch (const nlohmann::json::parse_error &e) {
    fail("malformed JSON: " + withoutExceptionId(e.what()));
  }
  if (!json.is_object())
    fail("expected a JSON object of token -> id, not " +
         std::string(json.type_name()));
  // N tokens with distinct ids in 0..N-1 have every id of the vocabulary.
  const int64_t size = static_cast<int64_t>(json.size());
  std::vector<std::string> tokenOfId(json.size());
  tokenBytes_.resize(json.size());
  std::unordered_map<std::string, int32_t> ids;
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
    tokenBytes_[id] = tokenBytesOf(token, fail);
    ids.emplace(token, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = ids.find(symbolText(b));
    if (it == ids.end())
      fail("no token for byte " + formatHex(b, "0x%02X") + " (its symbol \"" +
           symbolText(b) +
           "\"): the vocabulary needs all 256, so that any text encodes");
    byteTokens_[b] = it->second;
  }
  return ids;
}

void GPT2Tokenizer::loadMerges(
    const std::string &path, const std::string &vocabPath,
    const std::unordered_map<std::string, int32_t> &vocab) {
  const std::string text = mfile::readFileBytes("merges", path);
  int lineNumber = 0; // of the line being read, from 1
  const Fail fail = [&](const std::string &what) {
    throw std::runtime_error("merges " + path + ":" +
                             std::to_string(lineNumber) + ": " + what);
  };
  const auto idOf = [&](const std::string &token, const std::string &what) {
    const auto it = vocab.find(token);
    if (it == vocab.end())
      fail(what + "\"" + token + "\" is not in vocab " + vocabPath);
    return it->second;
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
    const std::string left = line.substr(0, space),
                      right = line.substr(space + 1);
    const int32_t leftId = idOf(left, ""), rightId = idOf(right, "");
    const int32_t result = idOf(left + right, "its result ");
    const int32_t rank = static_cast<int32_t>(lineOfRank.size());
    const auto [it, added] =
        merges_.emplace(pairKey(leftId, rightId), Merge{rank, result});
    if (!added)
      fail("the merge \"" + line + "\" is also on line " +
           std::to_string(lineOfRank[it->second.rank]));
    lineOfRank.push_back(lineNumber);
  }
}

std::vector<int32_t> GPT2Tokenizer::encode(const std::string &text) const {
  std::vector<int32_t> ids;
  // Words recur: each distinct piece goes through BPE once per call (a
  // cache local to the call keeps encode() thread-safe).
  std::unordered_map<std::string_view, std::vector<int32_t>> known;
  const std::string_view all(text);
  for (size_t pos = 0; pos < all.size();) {
    const size_t end = preTokenEnd(all, pos);
    const auto [it, isNew] = known.try_emplace(all.substr(pos, end - pos));
    if (isNew)
      it->second = bpe(it->first);
    ids.insert(ids.end(), it->second.begin(), it->second.end());
    pos = end;
  }
  return ids;
}

// encoder.py's bpe(): while some adjacent pair has a merge, take the pair
// of the lowest rank and merge its every occurrence, left to right without
// overlaps. Here in O(n log n) rather than the reference's O(n^2), as one
// piece may be long (a line of '='): a linked list of symbols and a heap of
// candidate pairs by (rank, position). A merge makes pairs of other ranks
// only (ab is neither a nor b), so a round takes every candidate of the
// lowest rank off the heap before it merges any; the pairs its merges make
// wait for a later round, as in the reference.
std::vector<int32_t> GPT2Tokenizer::bpe(std::string_view piece) const {
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
    symbols[i] = Symbol{byteTokens_[static_cast<unsigned char>(piece[i])],
                        i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto consider = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0)
      return;
    const int32_t leftId = symbols[left].id,
                  rightId = symbols[symbols[left].next].id;
    const auto it = merges_.find(pairKey(leftId, rightId));
    if (it != merges_.end())
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
