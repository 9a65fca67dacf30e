// The CPU runtime's generated-code buffers: the buffer cache over host
// memory, large blocks on huge pages (HostMemory.h).
#include "HostMemory.h"
#include "buffer_cache.h"
#include "fatal.h"

namespace {

void *freshHostBlock(size_t bytes) {
  static_assert(mrt::BufferCache::kAlignment <= 64,
                "mhost::allocate aligns to 64 bytes");
  void *block = mhost::allocate(bytes);
  if (!block)
    mrt::fatal("out of memory allocating %zu bytes", bytes);
  return block;
}

} // namespace

mrt::BufferCache &mrt::generatedCodeBuffers() {
  static auto *instance = new BufferCache(freshHostBlock); // outlives static dtors
  return *instance;
}
