#include "PreTokenize.h"

#include "Utf8.h"

#include <unicode/uchar.h>

#include <cstdint>

namespace mtok {

namespace {

enum class CharClass { Letter, Number, Space, Other };

struct Char {
  CharClass cls;
  size_t length;
};

CharClass classify(char32_t cp) {
  if (cp == kInvalidByte)
    return CharClass::Other;
  const UChar32 c = static_cast<UChar32>(cp);
  const uint32_t category = U_GET_GC_MASK(c);
  if (category & U_GC_L_MASK)
    return CharClass::Letter;
  if (category & U_GC_N_MASK)
    return CharClass::Number;
  if (u_isUWhiteSpace(c))
    return CharClass::Space;
  return CharClass::Other;
}

Char charAt(std::string_view text, size_t pos) {
  const DecodedChar c = decodeUtf8(text, pos);
  return {classify(c.codePoint), c.length};
}

// 's|'t|'re|'ve|'m|'ll|'d (ASCII apostrophe; letters of either case when
// `anyCase`): the length matched at pos, or 0.
size_t contractionLength(std::string_view text, size_t pos, bool anyCase) {
  if (text[pos] != '\'')
    return 0;
  const std::string_view rest = text.substr(pos + 1);
  auto same = [&](char a, char b) {
    return a == b || (anyCase && a >= 'A' && a <= 'Z' && a - 'A' + 'a' == b);
  };
  for (std::string_view suffix : {"s", "t", "re", "ve", "m", "ll", "d"}) {
    if (rest.size() < suffix.size())
      continue;
    bool matches = true;
    for (size_t i = 0; i < suffix.size(); ++i)
      matches = matches && same(rest[i], suffix[i]);
    if (matches)
      return 1 + suffix.size();
  }
  return 0;
}

// The end of the run of characters of class cls that starts at pos, at
// most `count` of them.
size_t runEnd(std::string_view text, size_t pos, CharClass cls,
              int64_t count = INT64_MAX) {
  for (int64_t i = 0; i < count && pos < text.size(); ++i) {
    const Char c = charAt(text, pos);
    if (c.cls != cls)
      break;
    pos += c.length;
  }
  return pos;
}

// \s+(?!\S)|\s+ at pos (a whitespace character): the whole run if it ends
// the text; otherwise all but its last character, which then leads the
// next piece (" word" is one piece), unless the run is that one character.
size_t whitespaceEnd(std::string_view text, size_t pos) {
  size_t lastStart = pos, end = pos;
  while (end < text.size()) {
    const Char c = charAt(text, end);
    if (c.cls != CharClass::Space)
      break;
    lastStart = end;
    end += c.length;
  }
  if (end == text.size() || lastStart == pos)
    return end;
  return lastStart;
}

bool isLineBreak(char c) { return c == '\r' || c == '\n'; }

size_t gpt2End(std::string_view text, size_t pos) {
  if (const size_t n = contractionLength(text, pos, /*anyCase=*/false))
    return pos + n;
  const Char first = charAt(text, pos);
  // " ?X+" for X the class of the character after an optional space (the
  // three classes are disjoint, so at most one alternative can match).
  if (text[pos] == ' ' && pos + 1 < text.size()) {
    const Char next = charAt(text, pos + 1);
    if (next.cls != CharClass::Space)
      return runEnd(text, pos + 1, next.cls);
  }
  if (first.cls != CharClass::Space)
    return runEnd(text, pos, first.cls);
  return whitespaceEnd(text, pos);
}

// Llama 3's alternatives in order; the first that matches wins.
size_t llama3End(std::string_view text, size_t pos) {
  if (const size_t n = contractionLength(text, pos, /*anyCase=*/true))
    return pos + n;
  const Char first = charAt(text, pos);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (first.cls == CharClass::Letter)
    return runEnd(text, pos, CharClass::Letter);
  if (first.cls != CharClass::Number && !isLineBreak(text[pos]) &&
      pos + first.length < text.size() &&
      charAt(text, pos + first.length).cls == CharClass::Letter)
    return runEnd(text, pos + first.length, CharClass::Letter);
  // \p{N}{1,3}
  if (first.cls == CharClass::Number)
    return runEnd(text, pos, CharClass::Number, 3);
  // " ?[^\s\p{L}\p{N}]+[\r\n]*"
  size_t start = pos;
  if (text[pos] == ' ' && pos + 1 < text.size() &&
      charAt(text, pos + 1).cls == CharClass::Other)
    start = pos + 1;
  if (charAt(text, start).cls == CharClass::Other) {
    size_t end = runEnd(text, start, CharClass::Other);
    while (end < text.size() && isLineBreak(text[end]))
      ++end;
    return end;
  }
  // Whitespace from here on. \s*[\r\n]+: up to the last line break of the
  // run, if it has one.
  size_t end = pos, afterBreak = 0;
  while (end < text.size()) {
    const Char c = charAt(text, end);
    if (c.cls != CharClass::Space)
      break;
    end += c.length;
    if (isLineBreak(text[end - 1]))
      afterBreak = end;
  }
  if (afterBreak)
    return afterBreak;
  // \s+(?!\S)|\s+, as GPT-2's.
  return whitespaceEnd(text, pos);
}

} // namespace

size_t preTokenEnd(PreTokenization pattern, std::string_view text,
                   size_t pos) {
  return pattern == PreTokenization::Llama3 ? llama3End(text, pos)
                                            : gpt2End(text, pos);
}

} // namespace mtok
