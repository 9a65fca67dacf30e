#include "PreTokenize.h"

#include "Utf8.h"

#include <unicode/uchar.h>

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

// 's|'t|'re|'ve|'m|'ll|'d (case-sensitive, ASCII apostrophe): the length
// matched at pos, or 0.
size_t contractionLength(std::string_view text, size_t pos) {
  if (text[pos] != '\'')
    return 0;
  const std::string_view rest = text.substr(pos + 1);
  for (std::string_view suffix : {"s", "t", "re", "ve", "m", "ll", "d"})
    if (rest.substr(0, suffix.size()) == suffix)
      return 1 + suffix.size();
  return 0;
}

// The end of the run of characters of class cls that starts at pos.
size_t runEnd(std::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
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

} // namespace

size_t preTokenEnd(std::string_view text, size_t pos) {
  if (const size_t n = contractionLength(text, pos))
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

} // namespace mtok
