#include "Prompts.h"

#include "FileIO.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace mrun {

Prompt parseTokenIds(const std::string &text) {
  Prompt ids;
  size_t begin = 0;
  for (;;) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    errno = 0;
    char *stop = nullptr;
    const long long id = std::strtoll(item.c_str(), &stop, 10);
    while (stop && *stop == ' ')
      ++stop;
    if (item.find_first_not_of(' ') == std::string::npos || *stop ||
        errno == ERANGE || id < 0 || id > std::numeric_limits<int32_t>::max())
      throw std::runtime_error("--prompt-tokens: \"" + item +
                               "\" is not a token id (expected \"1,2,3\")");
    ids.push_back(static_cast<int32_t>(id));
    if (end == text.size())
      return ids;
    begin = end + 1;
  }
}

std::vector<std::string> promptLines(const std::string &path,
                                     const std::string &bytes) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < bytes.size()) {
    size_t end = std::min(bytes.find('\n', begin), bytes.size());
    std::string line = bytes.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty())
      throw std::runtime_error("prompts file " + path + ": line " +
                               std::to_string(lines.size() + 1) +
                               " is empty (one prompt per line)");
    lines.push_back(std::move(line));
    begin = end + 1;
  }
  if (lines.empty())
    throw std::runtime_error("prompts file " + path + " holds no prompt");
  return lines;
}

std::vector<Prompt> readPrompts(const Options &opt,
                                const mtok::Tokenizer &tokenizer) {
  if (!opt.promptTokens.empty())
    return {parseTokenIds(opt.promptTokens)};
  if (!opt.prompt.empty())
    return {tokenizer.encode(opt.prompt)};
  std::vector<Prompt> prompts;
  for (const std::string &line :
       promptLines(opt.promptsFile,
                   mfile::readFileBytes("prompts file", opt.promptsFile)))
    prompts.push_back(tokenizer.encode(line));
  return prompts;
}

void checkPrompts(const std::vector<Prompt> &prompts, const Manifest &m,
                  int64_t maxNew) {
  if (static_cast<int64_t>(prompts.size()) > m.batch)
    throw std::runtime_error(
        std::to_string(prompts.size()) + " prompts, but the step generates " +
        std::to_string(m.batch) +
        " sequences at a time (megatron-compile --generate's batch)");
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string which = "prompt " + std::to_string(i);
    const Prompt &p = prompts[i];
    if (p.empty())
      throw std::runtime_error(which + " has no tokens");
    for (size_t k = 0; k < p.size(); ++k)
      if (p[k] >= m.validVocab)
        throw std::runtime_error(which + "'s token " + std::to_string(k) +
                                 " is " + std::to_string(p[k]) +
                                 ", outside the model's vocabulary of " +
                                 std::to_string(m.validVocab));
    const int64_t needed = static_cast<int64_t>(p.size()) + maxNew;
    if (needed > m.ctx)
      throw std::runtime_error(
          which + " has " + std::to_string(p.size()) +
          " tokens: with --max-new " + std::to_string(maxNew) + " it needs " +
          std::to_string(needed) + " positions, but the model's context (its "
          "KV cache) holds " + std::to_string(m.ctx));
  }
}

} // namespace mrun
