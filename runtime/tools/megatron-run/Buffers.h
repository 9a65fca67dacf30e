// The step's arguments: a zeroed host buffer for each, where they are
// initialised, fed batches and checkpointed; for a CUDA step's device
// arguments also the device buffer the step reads, copied from the host
// buffer by upload() and back by download().
#ifndef MEGATRON_RUN_BUFFERS_H
#define MEGATRON_RUN_BUFFERS_H

#include "Manifest.h"
#include "RuntimeApi.h"

#include <cstdint>
#include <vector>

namespace mrun {

class Buffers {
public:
  Buffers(const RuntimeApi &rt, const Manifest &m) : rt_(rt), m_(m) {}
  Buffers(const Buffers &) = delete;
  Buffers &operator=(const Buffers &) = delete;
  // Frees the device buffers too: mrt_device_free needs no context, so the
  // buffers may outlive the Mesh.
  ~Buffers();

  // One buffer per manifest arg, zeroed, each stack's members one after the
  // other in one allocation; after the mesh exists, since a CUDA context
  // picks the GPU that device buffers live on. Throws std::bad_alloc.
  void allocate();

  void upload(int arg);
  void uploadAll();
  void download(int arg);

  // The host buffer of `arg`.
  template <typename T> T *host(int arg) const {
    return static_cast<T *>(host_[arg]);
  }
  // The pointer array the step's entry points take (device buffers where
  // there are some).
  void **stepArgs() { return step_.data(); }

private:
  int64_t bytes(int arg) const;
  // Allocates `members` (args of one size and memory) as one buffer.
  void place(const std::vector<int> &members);

  const RuntimeApi &rt_;
  const Manifest &m_;
  std::vector<void *> host_, device_, step_;
  // What allocate() allocated, to free.
  std::vector<void *> ownedHost_, ownedDevice_;
};

} // namespace mrun

#endif // MEGATRON_RUN_BUFFERS_H
