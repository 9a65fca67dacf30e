// The generated code's allocator entry points (megatron_rt/allocator.h), for
// both runtimes: each serves them from its own buffer cache
// (generatedCodeBuffers(), beside its backing memory).
#include "megatron_rt/allocator.h"

#include "buffer_cache.h"

extern "C" void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  return mrt::generatedCodeBuffers().allocate(bytes,
                                              mrt::BufferCache::kAlignment);
}

extern "C" void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment,
                                                    size_t bytes) {
  return mrt::generatedCodeBuffers().allocate(bytes, alignment);
}

extern "C" void _mlir_memref_to_llvm_free(void *block) {
  mrt::generatedCodeBuffers().release(block);
}

