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

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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

InitRule initRule(const Arg &arg, int64_t numLayers) {
  const std::string &n = arg.name;
  if (endsWith(n, "ln_1.weight") || endsWith(n, "ln_2.weight") ||
      endsWith(n, "ln_f.weight"))
    return {InitRule::Constant, 1.0};
  if (endsWith(n, ".bias"))
    return {InitRule::Constant, 0.0};
  if (endsWith(n, ".weight") && arg.globalShape.size() == 2) {
    if (endsWith(n, "attn.c_proj.weight") || endsWith(n, "mlp.c_proj.weight"))
      return {InitRule::Normal,
              0.02 / std::sqrt(2.0 * static_cast<double>(
                                         numLayers > 0 ? numLayers : 1))};
    return {InitRule::Normal, 0.02};
  }
  throw std::runtime_error("no GPT-2 initialisation rule for parameter \"" +
                           n + "\" (shape " + shapeString(arg.globalShape) +
                           "); pass --init-from");
}

float normalValue(uint64_t seed, const std::string &name, int64_t index,
                  double stddev) {
  return normalAt(streamOf(seed, name), index, stddev);
}

void initParam(const Arg &arg, const TensorSlice &slice, int64_t numLayers,
               uint64_t seed, float *out) {
  const InitRule rule = initRule(arg, numLayers);
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
