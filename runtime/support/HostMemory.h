// Host memory for the training state and the step's buffers, shared by the
// CPU runtime's generated-code allocator and megatron-run's argument
// buffers, so that both get the same pages.
#ifndef MEGATRON_SUPPORT_HOST_MEMORY_H
#define MEGATRON_SUPPORT_HOST_MEMORY_H

#include <cstddef>

namespace mhost {

// Blocks of this size and more sit on transparent huge pages.
constexpr size_t kHugePageBytes = size_t(2) << 20;

// `bytes` of uninitialised host memory, 64-byte aligned, released with
// std::free; nullptr when out of memory or for a size too large to round
// up. A block of kHugePageBytes or more is aligned to and rounded up to
// whole huge pages and advised as huge-page memory (madvise MADV_HUGEPAGE). Debian's kernels give huge pages only to
// memory so advised, and the step's passes over its parameters, gradients
// and AdamW moments (gigabytes at GPT-2 124M) otherwise walk 4 KiB pages:
// a TLB miss every 4 KiB of each stream, and half a million page faults to
// first touch them.
void *allocate(size_t bytes);

} // namespace mhost

#endif // MEGATRON_SUPPORT_HOST_MEMORY_H
