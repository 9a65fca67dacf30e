// The CUDA runtime's generated-code allocator: the buffer cache over device
// memory. Blocks are handed out again only in the order the host frees and
// reallocates them; since every kernel and collective of the rank is
// ordered on its stream (collectives through events), work queued on a
// reused block runs after all work queued on its previous owner.
#include "megatron_rt/allocator.h"

#include "../../lib/buffer_cache.h"
#include "cuda_check.h"

namespace {

void *freshDeviceBlock(size_t bytes) {
  void *block = nullptr;
  cudaError_t error = cudaMalloc(&block, bytes);
  if (error != cudaSuccess)
    mrt::fatal("out of GPU memory allocating %zu bytes: %s", bytes,
               cudaGetErrorString(error));
  return block;
}

mrt::BufferCache &cache() {
  static auto *instance = new mrt::BufferCache(freshDeviceBlock); // outlives static dtors
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
