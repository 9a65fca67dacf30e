#include "fatal.h"

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace mrt {

void fatal(const char *fmt, ...) {
  // One write per message keeps lines from several ranks from interleaving.
  char message[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  std::fprintf(stderr, "megatron-rt: %s\n", message);
  std::abort();
}

int checkedInt(int64_t value, const char *what) {
  if (value < 0 || value > INT_MAX)
    fatal("%s = %lld does not fit in a non-negative int", what,
          static_cast<long long>(value));
  return static_cast<int>(value);
}

} // namespace mrt
