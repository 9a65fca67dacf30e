// GPT-2's pre-tokenisation: the text is cut into the matches of
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// (OpenAI's encoder.py, with Python's `regex` module), and BPE then runs on
// each piece alone. The pattern is matched by hand: every character is a
// letter, a number, whitespace or other, so some alternative matches at
// every position and the pieces cover the text.
#ifndef MEGATRON_TOKENIZER_PRE_TOKENIZE_H
#define MEGATRON_TOKENIZER_PRE_TOKENIZE_H

#include <cstddef>
#include <string_view>

namespace mtok {

// The end (a byte offset) of the piece that starts at pos < text.size().
// \p{L}, \p{N} and \s are ICU's general categories L and N and its
// White_Space property, the sets `regex` uses; a byte that is not
// well-formed UTF-8 (Utf8.h) is "other", as the lone surrogate Python's
// errors="surrogateescape" makes of it.
size_t preTokenEnd(std::string_view text, size_t pos);

} // namespace mtok

#endif // MEGATRON_TOKENIZER_PRE_TOKENIZE_H
