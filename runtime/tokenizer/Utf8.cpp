#include "Utf8.h"

namespace mtok {

namespace {

bool isContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// A lead byte's sequence length and the range its second byte must be in
// (table 3-7 narrows it after E0, ED, F0 and F4); length 0: not a lead byte.
struct LeadByte {
  size_t length;
  unsigned char secondMin, secondMax;
  char32_t bits;
};

LeadByte leadByte(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF)
    return {2, 0x80, 0xBF, b & 0x1Fu};
  if (b == 0xE0)
    return {3, 0xA0, 0xBF, b & 0x0Fu}; // no overlong forms
  if (b == 0xED)
    return {3, 0x80, 0x9F, b & 0x0Fu}; // no surrogates
  if (b >= 0xE1 && b <= 0xEF)
    return {3, 0x80, 0xBF, b & 0x0Fu};
  if (b == 0xF0)
    return {4, 0x90, 0xBF, b & 0x07u}; // no overlong forms
  if (b >= 0xF1 && b <= 0xF3)
    return {4, 0x80, 0xBF, b & 0x07u};
  if (b == 0xF4)
    return {4, 0x80, 0x8F, b & 0x07u}; // nothing above U+10FFFF
  return {0, 0, 0, 0};
}

} // namespace

DecodedChar decodeUtf8(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) {
    return static_cast<unsigned char>(text[i]);
  };
  const unsigned char first = byte(pos);
  if (first < 0x80)
    return {first, 1};
  const LeadByte lead = leadByte(first);
  if (lead.length == 0 || text.size() - pos < lead.length ||
      byte(pos + 1) < lead.secondMin || byte(pos + 1) > lead.secondMax)
    return {kInvalidByte, 1};
  char32_t cp = lead.bits;
  for (size_t i = 1; i < lead.length; ++i) {
    if (!isContinuation(byte(pos + i)))
      return {kInvalidByte, 1};
    cp = (cp << 6) | (byte(pos + i) & 0x3Fu);
  }
  return {cp, lead.length};
}

void appendUtf8(char32_t cp, std::string &out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

} // namespace mtok
