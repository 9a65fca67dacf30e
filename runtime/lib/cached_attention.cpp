#include "megatron_rt/attention.h"

#include "fatal.h"

#include <algorithm>
#include <cmath>
#include <vector>

// Generation's attention: a few new queries per sequence (one when decoding)
// against every cached key before them. Each (b, h) is independent and owns
// its cache rows and output columns, so threads split (b, h); a query's
// scores are one row of at most N, so they are materialised.

namespace {

// H query heads, KV cache heads; `ld` the row stride of the chunk's input.
struct Shape {
  int64_t L, B, T, H, KV, D, N, ld;
};

// Row `position` of cache head g of sequence b in layer `layer` of a cache.
int64_t cacheRow(const Shape &s, int64_t layer, int64_t b, int64_t g,
                 int64_t position) {
  return (((layer * s.B + b) * s.KV + g) * s.N + position) * s.D;
}

// Head h of token t of sequence b in a chunk input at row stride s.ld.
const float *inputRow(const float *x, const Shape &s, int64_t b, int64_t t,
                      int64_t h) {
  return x + (b * s.T + t) * s.ld + h * s.D;
}

void checkChunk(const int32_t *positions, int64_t layer, const Shape &s) {
  if (layer < 0 || layer >= s.L)
    mrt::fatal("generation: layer %lld of a KV cache of %lld layers",
               static_cast<long long>(layer), static_cast<long long>(s.L));
  for (int64_t b = 0; b < s.B; ++b)
    if (positions[b] < 0 || positions[b] + s.T > s.N)
      mrt::fatal("generation: sequence %lld's tokens at positions [%d, %lld) "
                 "do not fit the KV cache of %lld positions",
                 static_cast<long long>(b), positions[b],
                 static_cast<long long>(positions[b] + s.T),
                 static_cast<long long>(s.N));
}

// out = softmax(q K^T / sqrt(D)) V over cached positions [0, last].
void attendOne(const float *q, const float *keys, const float *values,
               int64_t last, const Shape &s, std::vector<float> &scores,
               float *out) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  float max = -INFINITY;
  for (int64_t j = 0; j <= last; ++j) {
    float dot = 0.0f;
    for (int64_t d = 0; d < s.D; ++d)
      dot += q[d] * keys[j * s.D + d];
    scores[j] = dot * scale;
    max = std::max(max, scores[j]);
  }
  float total = 0.0f;
  for (int64_t j = 0; j <= last; ++j)
    total += scores[j] = std::exp(scores[j] - max);
  std::fill_n(out, s.D, 0.0f);
  for (int64_t j = 0; j <= last; ++j) {
    const float weight = scores[j] / total;
    for (int64_t d = 0; d < s.D; ++d)
      out[d] += weight * values[j * s.D + d];
  }
}

} // namespace

void mrt_kv_cache_store_f32(const float *x, int64_t ld, float *cache,
                            const int32_t *positions, int64_t layer,
                            int64_t L, int64_t B, int64_t T, int64_t KV,
                            int64_t D, int64_t N) {
  const Shape s{L, B, T, KV, KV, D, N, ld};
  checkChunk(positions, layer, s);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < KV; ++g)
      for (int64_t t = 0; t < T; ++t)
        std::copy_n(inputRow(x, s, b, t, g), D,
                    cache + cacheRow(s, layer, b, g, positions[b] + t));
}

void mrt_attention_cached_f32(const float *q, int64_t ldq,
                              const float *k_cache, const float *v_cache,
                              const int32_t *positions, float *out,
                              int64_t layer, int64_t L, int64_t B, int64_t T,
                              int64_t H, int64_t KV, int64_t D, int64_t N) {
  const Shape s{L, B, T, H, KV, D, N, ldq};
  checkChunk(positions, layer, s);
  if (KV < 1 || H % KV != 0)
    mrt::fatal("generation: %lld cache heads do not divide %lld query heads",
               static_cast<long long>(KV), static_cast<long long>(H));
#pragma omp parallel
  {
    std::vector<float> scores(N);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t head = cacheRow(s, layer, b, h / (H / KV), 0);
        for (int64_t t = 0; t < T; ++t)
          attendOne(inputRow(q, s, b, t, h), k_cache + head, v_cache + head,
                    positions[b] + t, s, scores,
                    out + (b * T + t) * H * D + h * D);
      }
  }
}
