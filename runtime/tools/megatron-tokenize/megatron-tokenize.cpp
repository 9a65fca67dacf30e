// megatron-tokenize: text to the llm.c token file megatron-run trains on,
// and back (--decode), with the byte tokenizer or GPT-2's BPE
// (runtime/tokenizer/README.md). Exit status: 0, 1 after an input or
// output error, 2 after a usage error.
#include "FileIO.h"
#include "TokenFileFormat.h"
#include "Tokenizer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/stat.h>

namespace {

const char *const kUsage =
    "usage: megatron-tokenize [--tokenizer byte|gpt2|hf]\n"
    "           [--vocab VOCAB.json --merges MERGES.txt | --tokenizer-json\n"
    "           TOKENIZER.json] INPUT.txt -o OUT.bin\n"
    "       megatron-tokenize [--tokenizer byte|gpt2|hf] [files as above]\n"
    "           --decode TOKENS.bin\n"
    "\n"
    "Encodes INPUT.txt into an llm.c token file (a 256 x int32 header:\n"
    "20240520, 1, N; then N uint16 tokens, or, for a vocabulary past 65536\n"
    "ids, 20240801, 7, N; then N uint32 tokens), what megatron-run --data\n"
    "reads; or, with --decode, prints the text of such a file.\n"
    "\n"
    "options:\n"
    "  --tokenizer KIND   byte (default): one token per byte, vocabulary 256;\n"
    "                     gpt2: GPT-2's byte-level BPE (--vocab, --merges);\n"
    "                     hf: a Hugging Face tokenizer.json of byte-level BPE\n"
    "                     (GPT-2's or Llama 3's pre-tokenisation)\n"
    "  --vocab FILE       gpt2: vocab.json (token -> id, Hugging Face/OpenAI)\n"
    "  --merges FILE      gpt2: merges.txt (\"a b\" merges in rank order)\n"
    "  --tokenizer-json FILE  hf: tokenizer.json (its added tokens are\n"
    "                     recognised in the text; none are put around it)\n"
    "  -o, --output FILE  the token file to write (atomically)\n"
    "  --decode FILE      print the text of token file FILE to stdout\n"
    "  -h, --help         this help\n";

struct Options {
  mtok::TokenizerChoice tokenizer;
  std::string input, output, decode;
  bool help = false;
};

// Thrown for a command line that cannot run (exit 2).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "--name value" or "--name=value"; i is left on the value.
bool takeValue(const std::vector<std::string> &args, size_t &i,
               const std::vector<std::string> &names, std::string &value) {
  for (const std::string &name : names) {
    if (args[i] == name) {
      if (i + 1 == args.size())
        throw UsageError(name + " needs a value");
      value = args[++i];
      return true;
    }
    if (args[i].rfind(name + "=", 0) == 0) {
      value = args[i].substr(name.size() + 1);
      return true;
    }
  }
  return false;
}

// Whether two paths name one existing file (a link or another spelling).
bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

Options parseOptions(const std::vector<std::string> &args) {
  Options opt;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg == "-h" || arg == "--help")
      opt.help = true;
    else if (takeValue(args, i, {"--tokenizer"}, opt.tokenizer.kind) ||
             takeValue(args, i, {"--vocab"}, opt.tokenizer.vocab) ||
             takeValue(args, i, {"--merges"}, opt.tokenizer.merges) ||
             takeValue(args, i, {"--tokenizer-json"},
                       opt.tokenizer.tokenizerJson) ||
             takeValue(args, i, {"-o", "--output"}, opt.output) ||
             takeValue(args, i, {"--decode"}, opt.decode))
      continue;
    else if (arg.size() > 1 && arg[0] == '-')
      throw UsageError("unknown option " + arg);
    else if (!opt.input.empty())
      throw UsageError("more than one input file: " + opt.input + " and " +
                       arg);
    else
      opt.input = arg;
  }
  if (opt.help)
    return opt;
  if (!opt.decode.empty()) {
    if (!opt.input.empty() || !opt.output.empty())
      throw UsageError("--decode prints text: it takes no INPUT.txt or -o");
  } else if (opt.input.empty()) {
    throw UsageError("no input file (INPUT.txt, or --decode TOKENS.bin)");
  } else if (opt.output.empty()) {
    throw UsageError("no output file (-o OUT.bin)");
  } else if (sameFile(opt.input, opt.output)) {
    throw UsageError("-o " + opt.output +
                     " is the input file: writing the tokens would replace "
                     "the text");
  }
  try {
    mtok::checkTokenizerChoice(opt.tokenizer);
  } catch (const std::runtime_error &e) {
    throw UsageError(e.what());
  }
  return opt;
}

void encodeFile(const mtok::Tokenizer &tok, const Options &opt) {
  const std::string text = mfile::readFileBytes("input", opt.input);
  const std::vector<int32_t> tokens = tok.encode(text);
  // 16-bit tokens while the vocabulary allows (llm.c's GPT-2 files), else
  // 32-bit ones (its Llama 3 files).
  mtok::writeTokenFile(opt.output, tokens,
                       mtok::layoutForVocabulary(tok.vocabSize()));
  std::printf("%s: %zu bytes -> %zu tokens (%s, vocabulary %lld) -> %s\n",
              opt.input.c_str(), text.size(), tokens.size(),
              opt.tokenizer.kind.c_str(),
              static_cast<long long>(tok.vocabSize()),
              opt.output.c_str());
}

void decodeFile(const mtok::Tokenizer &tok, const Options &opt) {
  const std::vector<int32_t> tokens = mtok::readTokenFile(opt.decode);
  std::string text;
  try {
    text = tok.decode(tokens);
  } catch (const std::runtime_error &e) {
    throw std::runtime_error("tokens " + opt.decode + ": " + e.what());
  }
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
      std::fflush(stdout) != 0)
    throw std::runtime_error(std::string("cannot write the text: ") +
                             std::strerror(errno));
}

} // namespace

int main(int argc, char **argv) {
  Options opt;
  try {
    opt = parseOptions(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError &e) {
    std::fprintf(stderr,
                 "megatron-tokenize: error: %s (see megatron-tokenize "
                 "--help)\n",
                 e.what());
    return 2;
  }
  if (opt.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  try {
    const auto tok = mtok::makeTokenizer(opt.tokenizer);
    if (opt.decode.empty())
      encodeFile(*tok, opt);
    else
      decodeFile(*tok, opt);
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "megatron-tokenize: error: %s\n", e.what());
    return 1;
  }
}
