#include "scratch.h"

#include <map>
#include <mutex>

namespace mrt {
namespace {

struct Pool {
  std::mutex mutex;
  // Free buffers by capacity: lower_bound finds the smallest that fits.
  std::multimap<size_t, std::unique_ptr<std::byte[]>> free;
};

Pool &pool() {
  // Never destroyed: buffers may be released after static destruction
  // begins (a collective finishing as the process exits).
  static Pool *const instance = new Pool;
  return *instance;
}

} // namespace

std::unique_ptr<std::byte[]> acquireScratch(size_t size, size_t &capacity) {
  Pool &p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    // A buffer more than twice the request stays for a larger one: a small
    // request must not take the logits' buffer and make the next large one
    // allocate afresh.
    auto fit = p.free.lower_bound(size);
    if (fit != p.free.end() && fit->first <= 2 * size) {
      capacity = fit->first;
      std::unique_ptr<std::byte[]> buffer = std::move(fit->second);
      p.free.erase(fit);
      return buffer;
    }
  }
  capacity = size;
  return std::unique_ptr<std::byte[]>(new std::byte[size]);
}

void releaseScratch(std::unique_ptr<std::byte[]> buffer, size_t capacity) {
  if (!buffer)
    return;
  Pool &p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.free.emplace(capacity, std::move(buffer));
}

} // namespace mrt
