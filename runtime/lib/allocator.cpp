// Size-keyed cache of the generated code's buffers (see allocator.h).
#include "megatron_rt/allocator.h"

#include "fatal.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kAlignment = 64;

/// Stored just before each block: its rounded size.
struct alignas(kAlignment) Header {
  size_t bytes;
};

class BufferCache {
public:
  void *allocate(size_t bytes, size_t alignment) {
    if (alignment > kAlignment)
      mrt::fatal("buffer alignment %zu exceeds %zu", alignment, kAlignment);
    bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = free.find(bytes);
      if (it != free.end() && !it->second.empty()) {
        void *block = it->second.back();
        it->second.pop_back();
        cached -= bytes;
        return block;
      }
    }
    auto *header = static_cast<Header *>(
        std::aligned_alloc(kAlignment, sizeof(Header) + bytes));
    if (!header)
      mrt::fatal("out of memory allocating %zu bytes", bytes);
    header->bytes = bytes;
    return header + 1;
  }

  void release(void *block) {
    if (!block)
      return;
    size_t bytes = (static_cast<Header *>(block) - 1)->bytes;
    std::lock_guard<std::mutex> lock(mutex);
    free[bytes].push_back(block);
    cached += bytes;
  }

  size_t cachedBytes() {
    std::lock_guard<std::mutex> lock(mutex);
    return cached;
  }

private:
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void *>> free;
  size_t cached = 0;
};

BufferCache &cache() {
  static BufferCache *instance = new BufferCache; // outlives static dtors
  return *instance;
}

} // namespace

extern "C" void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  return cache().allocate(bytes, kAlignment);
}

extern "C" void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment,
                                                    size_t bytes) {
  return cache().allocate(bytes, alignment);
}

extern "C" void _mlir_memref_to_llvm_free(void *block) {
  cache().release(block);
}

extern "C" size_t mrt_cached_bytes(void) { return cache().cachedBytes(); }
