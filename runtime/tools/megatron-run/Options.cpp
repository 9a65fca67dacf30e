#include "Options.h"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace mrun {

const char *const kUsage =
    "usage: [mpirun -np TP] megatron-run STEP.so [options]\n"
    "\n"
    "Runs a training step compiled by megatron-mlir (STEP.so) on TP ranks.\n"
    "\n"
    "options:\n"
    "  --init-from FILE   initial weights from a global GPT-2 safetensors\n"
    "                     checkpoint (Hugging Face names, with or without\n"
    "                     \"transformer.\"); each rank reads only its slice\n"
    "  --seed S           without --init-from: GPT-2 initialisation from seed S\n"
    "                     (default 1337; the same weights for every TP size)\n"
    "  --data FILE        tokens: llm.c shard (20240520 header) or raw uint16\n"
    "                     (required)\n"
    "  --eval-only        run the forward pass only (mgt_forward) and print\n"
    "                     the loss of each batch\n"
    "  --steps N          number of batches/steps (default 1); step s uses\n"
    "                     batch s, wrapping around the end of the data\n"
    "  --log FILE         write one JSON line per step to FILE (rank 0)\n"
    "                     {\"step\", \"loss\", \"ms\", \"tokens_per_s\"}\n"
    "  --help             show this help\n"
    "\n"
    "Rank 0 prints \"step S loss X\" per step. Exit status: 0 success, 1 error,\n"
    "2 usage error.\n";

namespace {

int64_t parseInt(const std::string &opt, const std::string &value,
                 int64_t min) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE || v < min)
    throw std::invalid_argument(opt + ": expected an integer >= " +
                                std::to_string(min) + ", got \"" + value +
                                "\"");
  return v;
}

uint64_t parseUnsigned(const std::string &opt, const std::string &value) {
  errno = 0;
  char *end = nullptr;
  unsigned long long v = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || value[0] == '-' || *end != '\0' || errno == ERANGE)
    throw std::invalid_argument(opt + ": expected a non-negative integer, "
                                      "got \"" +
                                value + "\"");
  return v;
}

} // namespace

Options parseOptions(const std::vector<std::string> &args) {
  Options o;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0 || arg == "--") {
      if (arg == "--")
        throw std::invalid_argument("unexpected \"--\"");
      if (arg.size() > 1 && arg[0] == '-')
        throw std::invalid_argument("unknown option " + arg);
      positional.push_back(arg);
      continue;
    }
    std::string value;
    bool hasValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      hasValue = true;
    }
    auto takeValue = [&]() {
      if (hasValue)
        return value;
      if (i + 1 >= args.size())
        throw std::invalid_argument(arg + " needs a value");
      return args[++i];
    };
    auto noValue = [&]() {
      if (hasValue)
        throw std::invalid_argument(arg + " takes no value");
    };
    if (arg == "--help") {
      noValue();
      o.help = true;
    } else if (arg == "--eval-only") {
      noValue();
      o.evalOnly = true;
    } else if (arg == "--init-from") {
      o.initFrom = takeValue();
      if (o.initFrom.empty())
        throw std::invalid_argument("--init-from: empty file name");
    } else if (arg == "--seed") {
      o.seed = parseUnsigned(arg, takeValue());
    } else if (arg == "--data") {
      o.data = takeValue();
      if (o.data.empty())
        throw std::invalid_argument("--data: empty file name");
    } else if (arg == "--steps") {
      o.steps = parseInt(arg, takeValue(), 1);
    } else if (arg == "--log") {
      o.log = takeValue();
      if (o.log.empty())
        throw std::invalid_argument("--log: empty file name");
    } else {
      throw std::invalid_argument("unknown option " + arg);
    }
  }
  if (o.help)
    return o;
  if (positional.empty())
    throw std::invalid_argument("missing STEP.so");
  if (positional.size() > 1)
    throw std::invalid_argument("unexpected argument \"" + positional[1] +
                                "\"");
  o.stepLibrary = positional[0];
  if (o.data.empty())
    throw std::invalid_argument("--data FILE is required");
  return o;
}

} // namespace mrun
