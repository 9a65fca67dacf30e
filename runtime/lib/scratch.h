// Internal: reusable scratch memory for the CPU kernels.
//
// The bf16 entry points and the GEMMs' epilogues need fp32 working copies
// of whole activations on every call. Fresh std::vectors cost a zeroing pass
// and, above glibc's mmap threshold, page faults on every first touch (a
// fifth of the bf16 step's time before this pool). Buffers go back to a
// process-wide pool when released and are handed out again uninitialised,
// so the step loop allocates nothing after its first step.
#ifndef MEGATRON_RT_LIB_SCRATCH_H
#define MEGATRON_RT_LIB_SCRATCH_H

#include <cstddef>
#include <cstdint>
#include <memory>

namespace mrt {

/// The pool: the smallest free buffer of `size` to 2 * `size` bytes, or a
/// new one of exactly `size`; `capacity` receives the buffer's size, which
/// releaseScratch takes back with it.
std::unique_ptr<std::byte[]> acquireScratch(size_t size, size_t &capacity);
void releaseScratch(std::unique_ptr<std::byte[]> buffer, size_t capacity);

/// `count` uninitialised Ts from the pool, returned to it on destruction.
/// Any thread may release a buffer another acquired (a collective's staging
/// copy is released by the progress thread).
template <typename T> class Scratch {
public:
  explicit Scratch(int64_t count)
      : bytes(acquireScratch(static_cast<size_t>(count) * sizeof(T),
                             capacity)) {}
  ~Scratch() { releaseScratch(std::move(bytes), capacity); }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  T *data() { return reinterpret_cast<T *>(bytes.get()); }
  const T *data() const { return reinterpret_cast<const T *>(bytes.get()); }

private:
  size_t capacity = 0;
  std::unique_ptr<std::byte[]> bytes;
};

} // namespace mrt

#endif // MEGATRON_RT_LIB_SCRATCH_H
