// UTF-8 decoding that never fails: GPT-2's pre-tokeniser works on code
// points, yet any byte string must encode (and decode back exactly).
#ifndef MEGATRON_TOKENIZER_UTF8_H
#define MEGATRON_TOKENIZER_UTF8_H

#include <cstddef>
#include <string>
#include <string_view>

namespace mtok {

// The code point of a byte that does not belong to a well-formed UTF-8
// sequence (not a Unicode value).
constexpr char32_t kInvalidByte = 0xFFFFFFFF;

struct DecodedChar {
  char32_t codePoint; // or kInvalidByte
  size_t length;      // in bytes, >= 1
};

// The character that starts at text[pos] (pos < text.size()). Well-formed
// means Unicode's table 3-7, as Python's decoder: no overlong forms, no
// surrogates, nothing above U+10FFFF, no truncated sequence. Any other byte
// is {kInvalidByte, 1}, the unit Python's errors="surrogateescape" gives
// each undecodable byte.
DecodedChar decodeUtf8(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of cp (a Unicode scalar value) to out.
void appendUtf8(char32_t cp, std::string &out);

} // namespace mtok

#endif // MEGATRON_TOKENIZER_UTF8_H
