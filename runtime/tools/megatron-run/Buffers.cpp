#include "Buffers.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace mrun {
namespace {

void *allocZeroed(size_t bytes) {
  const size_t align = 64;
  size_t size = (bytes + align - 1) / align * align;
  if (size == 0)
    size = align;
  void *p = std::aligned_alloc(align, size);
  if (!p)
    throw std::bad_alloc();
  std::memset(p, 0, size);
  return p;
}

} // namespace

Buffers::~Buffers() {
  for (void *p : host_)
    std::free(p);
  for (void *p : device_)
    if (p)
      rt_.deviceFree(p);
}

void Buffers::allocate() {
  for (size_t i = 0; i < m_.args.size(); ++i) {
    const int64_t n = bytes(static_cast<int>(i));
    host_.push_back(allocZeroed(n));
    device_.push_back(m_.args[i].onDevice ? rt_.deviceAlloc(n) : nullptr);
    step_.push_back(m_.args[i].onDevice ? device_.back() : host_.back());
  }
}

void Buffers::upload(int arg) {
  if (device_[arg])
    rt_.copyToDevice(device_[arg], host_[arg], bytes(arg));
}

void Buffers::uploadAll() {
  for (size_t i = 0; i < host_.size(); ++i)
    upload(static_cast<int>(i));
}

void Buffers::download(int arg) {
  if (device_[arg])
    rt_.copyToHost(host_[arg], device_[arg], bytes(arg));
}

int64_t Buffers::bytes(int arg) const {
  return m_.args[arg].localElements() * m_.args[arg].elementBytes();
}

} // namespace mrun
