// The CPU runtime's generated-code buffers: the buffer cache over aligned
// host memory.
#include "buffer_cache.h"
#include "fatal.h"

#include <cstdlib>

namespace {

void *freshHostBlock(size_t bytes) {
  void *block = std::aligned_alloc(mrt::BufferCache::kAlignment, bytes);
  if (!block)
    mrt::fatal("out of memory allocating %zu bytes", bytes);
  return block;
}

} // namespace

mrt::BufferCache &mrt::generatedCodeBuffers() {
  static auto *instance = new BufferCache(freshHostBlock); // outlives static dtors
  return *instance;
}
