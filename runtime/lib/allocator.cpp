// The CPU runtime's generated-code allocator: the buffer cache over aligned
// host memory.
#include "megatron_rt/allocator.h"

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

mrt::BufferCache &cache() {
  static auto *instance = new mrt::BufferCache(freshHostBlock); // outlives static dtors
  return *instance;
}

} // namespace

extern "C" void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  return cache().allocate(bytes, mrt::BufferCache::kAlignment);
}

extern "C" void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment,
                                                    size_t bytes) {
  return cache().allocate(bytes, alignment);
}

extern "C" void _mlir_memref_to_llvm_free(void *block) {
  cache().release(block);
}

extern "C" size_t mrt_cached_bytes(void) { return cache().cachedBytes(); }
