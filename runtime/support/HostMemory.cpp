#include "HostMemory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace mhost {
namespace {

constexpr size_t kAlignment = 64;

size_t roundUp(size_t bytes, size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

} // namespace

void *allocate(size_t bytes) {
  // Rounding up must not wrap around to a small block.
  if (bytes > SIZE_MAX - kHugePageBytes)
    return nullptr;
  if (bytes < kHugePageBytes)
    return std::aligned_alloc(kAlignment, roundUp(bytes ? bytes : 1, kAlignment));
  size_t size = roundUp(bytes, kHugePageBytes);
  void *block = std::aligned_alloc(kHugePageBytes, size);
  // Advice only: where the kernel has huge pages off, the block keeps
  // 4 KiB pages and works the same.
  if (block)
    madvise(block, size, MADV_HUGEPAGE);
  return block;
}

} // namespace mhost
