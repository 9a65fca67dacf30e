#include "Init.h"

#include <cmath>
#include <stdexcept>

namespace mrun {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(const std::string &s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001B3ull;
  return h;
}

uint64_t streamOf(uint64_t seed, const std::string &name) {
  return mix(seed ^ mix(fnv1a64(name)));
}

struct Pair {
  double radius, angle;
};

Pair pairAt(uint64_t stream, uint64_t k) {
  const uint64_t a = mix(stream + (2 * k + 1) * kGolden);
  const uint64_t b = mix(stream + (2 * k + 2) * kGolden);
  const double u1 = static_cast<double>((a >> 11) + 1) * 0x1.0p-53;
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  return {std::sqrt(-2.0 * std::log(u1)), 2.0 * M_PI * u2};
}

float normalAt(uint64_t stream, int64_t index, double stddev) {
  const Pair p = pairAt(stream, static_cast<uint64_t>(index) / 2);
  return static_cast<float>(stddev * p.radius *
                            (index % 2 ? std::sin(p.angle)
                                       : std::cos(p.angle)));
}

// dst[j] = element first + j, for j in [0, count): one pair per two elements.
void fillNormal(uint64_t stream, int64_t first, int64_t count, double stddev,
                float *dst) {
  int64_t j = 0;
  if (first % 2 && count > 0) {
    dst[0] = normalAt(stream, first, stddev);
    j = 1;
  }
  const int64_t pairs = (count - j) / 2;
#pragma omp parallel for schedule(static) if (pairs >= 4096)
  for (int64_t q = 0; q < pairs; ++q) {
    const int64_t i = first + j + 2 * q;
    const Pair p = pairAt(stream, static_cast<uint64_t>(i) / 2);
    const double c = std::cos(p.angle), s = std::sin(p.angle);
    dst[j + 2 * q] = static_cast<float>(stddev * p.radius * c);
    dst[j + 2 * q + 1] = static_cast<float>(stddev * p.radius * s);
  }
  for (int64_t r = j + 2 * pairs; r < count; ++r)
    dst[r] = normalAt(stream, first + r, stddev);
}

} // namespace

InitRule initRule(const Arg &arg) {
  if (!arg.hasInit)
    throw std::runtime_error("the model states no initialisation for parameter "
                             "\"" + arg.name + "\" (shape " +
                             shapeString(arg.globalShape) +
                             "; no tp.init in its IR); pass --init-from");
  return {arg.initNormal ? InitRule::Normal : InitRule::Constant,
          arg.initValue};
}

float normalValue(uint64_t seed, const std::string &name, int64_t index,
                  double stddev) {
  return normalAt(streamOf(seed, name), index, stddev);
}

void initParam(const Arg &arg, const TensorSlice &slice, uint64_t seed,
               float *out) {
  const InitRule rule = initRule(arg);
  const uint64_t stream = streamOf(seed, arg.name);
  forEachRun(slice, [&](int64_t local, int64_t ckpt, int64_t count) {
    float *dst = out + local;
    if (ckpt < 0) {
      for (int64_t i = 0; i < count; ++i)
        dst[i] = 0.0f;
    } else if (rule.kind == InitRule::Constant) {
      for (int64_t i = 0; i < count; ++i)
        dst[i] = static_cast<float>(rule.value);
    } else {
      fillNormal(stream, ckpt, count, rule.value, dst);
    }
  });
}

} // namespace mrun
