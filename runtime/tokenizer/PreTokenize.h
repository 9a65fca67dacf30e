// Byte-level BPE's pre-tokenisation: the text is cut into the matches of a
// regex, and BPE then runs on each piece alone. Two patterns, each matched
// by hand (every character is a letter, a number, whitespace or other, so
// some alternative matches at every position and the pieces cover the
// text):
//
// GPT-2's (OpenAI's encoder.py, with Python's `regex` module):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// Llama 3's (its tokenizer.json's Split, tiktoken's cl100k):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
#ifndef MEGATRON_TOKENIZER_PRE_TOKENIZE_H
#define MEGATRON_TOKENIZER_PRE_TOKENIZE_H

#include <cstddef>
#include <string_view>

namespace mtok {

enum class PreTokenization { GPT2, Llama3 };

// Llama 3's pattern as its tokenizer.json spells it.
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The end (a byte offset) of the piece that starts at pos < text.size().
// \p{L}, \p{N} and \s are ICU's general categories L and N and its
// White_Space property, the sets `regex` uses; a byte that is not
// well-formed UTF-8 (Utf8.h) is "other", as the lone surrogate Python's
// errors="surrogateescape" makes of it.
size_t preTokenEnd(PreTokenization pattern, std::string_view text, size_t pos);

} // namespace mtok

#endif // MEGATRON_TOKENIZER_PRE_TOKENIZE_H
