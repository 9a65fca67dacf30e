#include "Slicing.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace mrun {

int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<Interval> sliceDim(int64_t global, int64_t parts, int64_t sections,
                               int64_t rank) {
  if (parts < 1 || sections < 1 || rank < 0 || rank >= parts || global < 0)
    throw std::invalid_argument(
        "invalid split: size " + std::to_string(global) + ", " +
        std::to_string(parts) + " ranks, " + std::to_string(sections) +
        " sections, rank " + std::to_string(rank));
  if (global % (sections * parts) != 0)
    throw std::invalid_argument(
        "size " + std::to_string(global) + " is not divisible by " +
        std::to_string(sections) + " sections x " + std::to_string(parts) +
        " ranks");
  const int64_t section = global / sections, chunk = section / parts;
  std::vector<Interval> out;
  for (int64_t s = 0; s < sections; ++s)
    out.push_back({s * chunk, s * section + rank * chunk, chunk});
  return out;
}

std::vector<Interval> nestSlice(const std::vector<Interval> &outer,
                                int64_t parts, int64_t rank) {
  int64_t length = 0;
  for (const Interval &iv : outer)
    length += iv.length;
  if (parts < 1 || rank < 0 || rank >= parts || length % parts != 0)
    throw std::invalid_argument(
        "invalid nested split: " + std::to_string(length) + " elements, " +
        std::to_string(parts) + " ranks, rank " + std::to_string(rank));
  const int64_t chunk = length / parts, begin = rank * chunk,
                end = begin + chunk;
  std::vector<Interval> out;
  for (const Interval &iv : outer) {
    const int64_t from = std::max(begin, iv.local),
                  to = std::min(end, iv.local + iv.length);
    if (from < to)
      out.push_back({from - begin, iv.global + (from - iv.local), to - from});
  }
  return out;
}

int64_t localToGlobal(int64_t local, int64_t global, int64_t parts,
                      int64_t sections, int64_t rank) {
  for (const Interval &iv : sliceDim(global, parts, sections, rank))
    if (local >= iv.local && local < iv.local + iv.length)
      return iv.global + (local - iv.local);
  throw std::out_of_range("local index " + std::to_string(local) +
                          " out of range");
}

std::vector<int64_t> TensorSlice::localShape() const {
  std::vector<int64_t> shape;
  for (const auto &ivs : dims) {
    int64_t n = 0;
    for (const Interval &iv : ivs)
      n += iv.length;
    shape.push_back(n);
  }
  return shape;
}

int64_t TensorSlice::localElements() const {
  return numElements(localShape());
}

void forEachRun(const TensorSlice &slice,
                const std::function<void(int64_t, int64_t, int64_t)> &fn) {
  const int rank = static_cast<int>(slice.dims.size());
  const std::vector<int64_t> local = slice.localShape();
  const std::vector<int64_t> &global = slice.globalShape;
  const std::vector<int64_t> &ckpt = slice.checkpointShape;
  if (slice.localElements() == 0)
    return;
  // The innermost dimension that is not whole: every dimension after it is
  // the same in the local, global and checkpoint tensors, so a run spans it.
  int split = -1;
  for (int d = 0; d < rank; ++d)
    if (slice.dims[d].size() != 1 || local[d] != global[d] ||
        ckpt[d] != global[d])
      split = d;
  if (split < 0) { // the whole tensor, identical everywhere
    fn(0, 0, slice.localElements());
    return;
  }
  int64_t inner = 1;
  for (int d = split + 1; d < rank; ++d)
    inner *= global[d];
  std::vector<int64_t> lstride(rank, 1), cstride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) {
    lstride[d] = lstride[d + 1] * local[d + 1];
    cstride[d] = cstride[d + 1] * ckpt[d + 1];
  }
  // Odometer over the local indices of the outer dimensions [0, split).
  std::vector<int64_t> idx(split, 0);
  for (;;) {
    int64_t loff = 0, coff = 0;
    bool padding = false;
    for (int d = 0; d < split; ++d) {
      int64_t g = -1;
      for (const Interval &iv : slice.dims[d])
        if (idx[d] >= iv.local && idx[d] < iv.local + iv.length)
          g = iv.global + (idx[d] - iv.local);
      padding |= g >= ckpt[d];
      loff += idx[d] * lstride[d];
      coff += g * cstride[d];
    }
    for (const Interval &iv : slice.dims[split]) {
      const int64_t base = loff + iv.local * lstride[split];
      const int64_t valid =
          padding ? 0
                  : std::clamp<int64_t>(ckpt[split] - iv.global, 0, iv.length);
      if (valid > 0)
        fn(base, coff + iv.global * cstride[split], valid * inner);
      if (valid < iv.length)
        fn(base + valid * inner, -1, (iv.length - valid) * inner);
    }
    int d = split - 1;
    while (d >= 0 && ++idx[d] == local[d])
      idx[d--] = 0;
    if (d < 0)
      break;
  }
}

template <typename T>
void sliceElements(const TensorSlice &slice, const T *full, T *local) {
  forEachRun(slice, [&](int64_t l, int64_t c, int64_t count) {
    if (c < 0)
      std::memset(local + l, 0, count * sizeof(T));
    else
      std::memcpy(local + l, full + c, count * sizeof(T));
  });
}

void sliceTensor(const TensorSlice &slice, const float *full, float *local) {
  sliceElements(slice, full, local);
}

void sliceTensor(const TensorSlice &slice, const int32_t *full,
                 int32_t *local) {
  sliceElements(slice, full, local);
}

void unsliceTensor(const TensorSlice &slice, const float *local, float *full) {
  forEachRun(slice, [&](int64_t l, int64_t c, int64_t count) {
    if (c >= 0)
      std::memcpy(full + c, local + l, count * sizeof(float));
  });
}

} // namespace mrun
