#include "buffer_cache.h"

#include "fatal.h"

#include <cstdint>

namespace mrt {

void *BufferCache::allocate(size_t bytes, size_t alignment) {
  if (alignment > kAlignment)
    fatal("buffer alignment %zu exceeds %zu", alignment, kAlignment);
  // Rounding up must not wrap around to a small block.
  if (bytes > SIZE_MAX - kAlignment)
    fatal("cannot allocate a buffer of %zu bytes", bytes);
  // A zero-byte buffer still needs an address of its own.
  bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (bytes == 0)
    bytes = kAlignment;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = free.find(bytes);
  if (it != free.end() && !it->second.empty()) {
    void *block = it->second.back();
    it->second.pop_back();
    return block;
  }
  void *block = fresh(bytes);
  sizes[block] = bytes;
  return block;
}

void BufferCache::release(void *block) {
  if (!block)
    return;
  std::lock_guard<std::mutex> lock(mutex);
  auto size = sizes.find(block);
  if (size == sizes.end())
    fatal("freeing %p, which the buffer cache did not allocate", block);
  free[size->second].push_back(block);
}

} // namespace mrt
