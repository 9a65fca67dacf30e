// megatron-run's command line.
#ifndef MEGATRON_RUN_OPTIONS_H
#define MEGATRON_RUN_OPTIONS_H

#include <cstdint>
#include <string>
#include <vector>

namespace mrun {

struct Options {
  std::string stepLibrary;
  std::string initFrom; // empty: GPT-2 init from seed
  uint64_t seed = 1337;
  std::string data;
  bool evalOnly = false;
  int64_t steps = 1;
  std::string log;
  bool help = false;
};

extern const char *const kUsage;

// Parses argv (without argv[0]). "--opt value" and "--opt=value" are both
// accepted. Throws std::invalid_argument (a usage error: exit 2).
Options parseOptions(const std::vector<std::string> &args);

} // namespace mrun

#endif // MEGATRON_RUN_OPTIONS_H
