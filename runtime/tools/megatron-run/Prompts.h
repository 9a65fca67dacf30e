// Generation's prompts: token ids from the command line, or text (one
// prompt, or a file of one per line) through the tokenizer; checked against
// what the compiled generation step can hold.
#ifndef MEGATRON_RUN_PROMPTS_H
#define MEGATRON_RUN_PROMPTS_H

#include "Manifest.h"
#include "Options.h"

#include "Tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mrun {

using Prompt = std::vector<int32_t>;

// "1,2,3" (spaces around the ids allowed). Throws std::runtime_error naming
// the text that is no token id.
Prompt parseTokenIds(const std::string &text);

// The lines of a prompts file, each one prompt; a last line may end in
// '\n' (and "\r\n" is one line end). Throws naming the file and the first
// empty line.
std::vector<std::string> promptLines(const std::string &path,
                                     const std::string &bytes);

// The prompts --prompt-tokens, --prompt or --prompts-file give.
std::vector<Prompt> readPrompts(const Options &opt,
                                const mtok::Tokenizer &tokenizer);

// Throws std::runtime_error unless the step can continue every prompt by
// `maxNew` tokens: at most batch prompts, each of at least one token inside
// the model's vocabulary and with room in the KV cache for maxNew more.
void checkPrompts(const std::vector<Prompt> &prompts, const Manifest &m,
                  int64_t maxNew);

} // namespace mrun

#endif // MEGATRON_RUN_PROMPTS_H
