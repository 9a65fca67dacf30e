// Internal: the size-keyed cache behind both runtimes' generated-code
// allocators (see megatron_rt/allocator.h). The CPU runtime backs it with
// aligned host memory, the CUDA runtime with device memory, which the host
// cannot write a block header into: sizes are kept on the side.
#ifndef MEGATRON_RT_LIB_BUFFER_CACHE_H
#define MEGATRON_RT_LIB_BUFFER_CACHE_H

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace mrt {

class BufferCache {
public:
  /// `fresh` returns new memory of at least `bytes`, aligned to `alignment`,
  /// or fails the process itself.
  using FreshAllocator = void *(*)(size_t bytes);

  static constexpr size_t kAlignment = 64;

  explicit BufferCache(FreshAllocator fresh) : fresh(fresh) {}

  void *allocate(size_t bytes, size_t alignment);
  void release(void *block);

private:
  FreshAllocator fresh;
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void *>> free;
  std::unordered_map<void *, size_t> sizes;
};

/// The cache behind the generated code's allocations: host memory in the CPU
/// runtime, device memory in the CUDA runtime (each defines it).
BufferCache &generatedCodeBuffers();

} // namespace mrt

#endif // MEGATRON_RT_LIB_BUFFER_CACHE_H
