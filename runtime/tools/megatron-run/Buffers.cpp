#include "Buffers.h"

#include "HostMemory.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace mrun {
namespace {

// Zeroed by every thread, a huge page at a time: the first touch of a
// page is what costs (the kernel clears it, and on a VM the host backs it),
// 0.4-2 GB/s from one thread on the development VM against 0.5-3.9 GB/s
// from two, and the 124M model's state is 1.5 GB.
void *allocZeroed(size_t bytes, const std::string &what) {
  void *p = mhost::allocate(bytes);
  if (!p)
    throw std::runtime_error("cannot allocate " + std::to_string(bytes) +
                             " bytes of host memory for " + what);
  char *bytesAt = static_cast<char *>(p);
  const int64_t pages = static_cast<int64_t>(
      (bytes + mhost::kHugePageBytes - 1) / mhost::kHugePageBytes);
#pragma omp parallel for schedule(static) if (pages > 1)
  for (int64_t page = 0; page < pages; ++page) {
    size_t begin = static_cast<size_t>(page) * mhost::kHugePageBytes;
    std::memset(bytesAt + begin, 0,
                std::min(mhost::kHugePageBytes, bytes - begin));
  }
  return p;
}

} // namespace

Buffers::~Buffers() {
  for (void *p : ownedHost_)
    std::free(p);
  for (void *p : ownedDevice_)
    rt_.deviceFree(p);
}

void Buffers::allocate() {
  const size_t n = m_.args.size();
  host_.assign(n, nullptr);
  device_.assign(n, nullptr);
  step_.assign(n, nullptr);
  // A stack is one buffer, its members one after the other.
  for (const std::vector<int> &stack : m_.stacks)
    place(stack);
  for (size_t i = 0; i < n; ++i)
    if (!host_[i])
      place({static_cast<int>(i)});
}

void Buffers::place(const std::vector<int> &members) {
  const int64_t each = bytes(members.front());
  const std::string what =
      "\"" + m_.args[members.front()].name + "\"" +
      (members.size() > 1 ? " and its layers' stack" : "");
  int64_t total = 0;
  if (__builtin_mul_overflow(each, static_cast<int64_t>(members.size()),
                             &total))
    throw std::runtime_error("the buffer of " + what +
                             " is too large to count in 64 bits");
  char *host = static_cast<char *>(allocZeroed(total, what));
  ownedHost_.push_back(host);
  char *device = nullptr;
  if (m_.args[members.front()].onDevice) {
    device = static_cast<char *>(rt_.deviceAlloc(total));
    ownedDevice_.push_back(device);
  }
  for (size_t k = 0; k < members.size(); ++k) {
    const int arg = members[k];
    host_[arg] = host + k * each;
    device_[arg] = device ? device + k * each : nullptr;
    step_[arg] = device ? device_[arg] : host_[arg];
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
