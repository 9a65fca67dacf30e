#include "Sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

namespace mrun {
namespace {

// A column top-k or top-p dropped, or padding.
constexpr float kDropped = -INFINITY;

// fn(local, global) for each of this rank's columns inside the vocabulary.
void forEachColumn(const VocabShard &shard,
                   const std::function<void(int64_t, int64_t)> &fn) {
  for (const Interval &in : shard.columns)
    for (int64_t k = 0; k < in.length && in.global + k < shard.validVocab; ++k)
      fn(in.local + k, in.global + k);
}

// The candidates' scores [batch, localVocab]: logits / temperature (the
// logits themselves when greedy), kDropped for padding.
std::vector<float> scaledLogits(const float *logits, const VocabShard &shard,
                                int64_t batch, double temperature) {
  const int64_t V = shard.localVocab;
  std::vector<float> z(batch * V, kDropped);
  const float scale = temperature > 0 ? static_cast<float>(1.0 / temperature)
                                      : 1.0f;
  for (int64_t b = 0; b < batch; ++b)
    forEachColumn(shard, [&](int64_t local, int64_t) {
      z[b * V + local] = logits[b * V + local] * scale;
    });
  return z;
}

// Drops, per sequence, every score below the k-th largest of the whole
// vocabulary: each rank's k largest, gathered, hold the global k largest.
void keepTopK(const Mesh &mesh, std::vector<float> &z, int64_t V,
              int64_t batch, int64_t k) {
  std::vector<float> local(batch * k, kDropped);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> row(z.begin() + b * V, z.begin() + (b + 1) * V);
    const int64_t n = std::min(k, V);
    std::partial_sort(row.begin(), row.begin() + n, row.end(),
                      std::greater<float>());
    std::copy_n(row.begin(), n, local.begin() + b * k);
  }
  const int64_t ranks = mesh.axisSize(MRT_AXIS_TP);
  std::vector<float> all(ranks * batch * k);
  mesh.allGather(MRT_AXIS_TP, local.data(), all.data(), batch * k);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> candidates;
    for (int64_t r = 0; r < ranks; ++r)
      candidates.insert(candidates.end(), all.begin() + (r * batch + b) * k,
                        all.begin() + (r * batch + b + 1) * k);
    std::nth_element(candidates.begin(), candidates.begin() + (k - 1),
                     candidates.end(), std::greater<float>());
    const float threshold = candidates[k - 1];
    for (int64_t c = 0; c < V; ++c)
      if (z[b * V + c] < threshold)
        z[b * V + c] = kDropped;
  }
}

// Drops, per sequence, the least likely scores while the most likely ones
// that remain still hold probability p or more: the smallest set of
// highest-probability tokens whose mass reaches p (ties kept together).
// The threshold is bisected over the scores' range with the mass above it
// all-reduced, until no score lies strictly inside the bracket [lo, hi):
// mass(z >= lo) >= p > mass(z >= hi), so z >= lo is the set.
void keepTopP(const Mesh &mesh, std::vector<float> &z, int64_t V,
              int64_t batch, double p) {
  // Per sequence: the largest score and minus the smallest kept one.
  std::vector<float> extremes(2 * batch, kDropped);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < V; ++c)
      if (const float s = z[b * V + c]; s != kDropped) {
        extremes[b] = std::max(extremes[b], s);
        extremes[batch + b] = std::max(extremes[batch + b], -s);
      }
  mesh.allReduce(MRT_AXIS_TP, extremes.data(), 2 * batch, MRT_REDUCE_MAX);
  // Probabilities relative to the largest: weights exp(z - max), their sum.
  std::vector<float> weights(batch * V, 0.0f), total(batch, 0.0f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < V; ++c)
      if (z[b * V + c] != kDropped)
        total[b] += weights[b * V + c] = std::exp(z[b * V + c] - extremes[b]);
  mesh.allReduce(MRT_AXIS_TP, total.data(), batch, MRT_REDUCE_SUM);
  std::vector<double> lo(batch), hi(batch);
  for (int64_t b = 0; b < batch; ++b) {
    lo[b] = -extremes[batch + b];
    hi[b] = extremes[b] + 1.0;
  }
  // Each round: per sequence the mass at or above mid and the scores
  // strictly inside (lo, hi); a sequence with none inside is done.
  for (;;) {
    std::vector<float> round(2 * batch, 0.0f);
    for (int64_t b = 0; b < batch; ++b) {
      const double mid = 0.5 * (lo[b] + hi[b]);
      for (int64_t c = 0; c < V; ++c) {
        const float s = z[b * V + c];
        if (s == kDropped)
          continue;
        if (s >= mid)
          round[b] += weights[b * V + c];
        round[batch + b] += s > lo[b] && s < hi[b];
      }
    }
    mesh.allReduce(MRT_AXIS_TP, round.data(), 2 * batch, MRT_REDUCE_SUM);
    bool open = false;
    for (int64_t b = 0; b < batch; ++b) {
      if (round[batch + b] == 0)
        continue;
      open = true;
      const double mid = 0.5 * (lo[b] + hi[b]);
      (round[b] >= p * total[b] ? lo[b] : hi[b]) = mid;
    }
    if (!open)
      break;
  }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < V; ++c)
      if (z[b * V + c] < lo[b])
        z[b * V + c] = kDropped;
}

// splitmix64's finaliser: a bijection that mixes every input bit.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Per rank and sequence: its best candidate (score, global id) and whether
// any of its logits was not finite, as floats for the gather (ids below
// 2^24 are exact: the manifest checks the vocabulary).
constexpr int64_t kCandidateFloats = 3;

} // namespace

float gumbelNoise(uint64_t seed, int64_t sequence, int64_t step,
                  int64_t token) {
  uint64_t h = mix(seed + 0x9e3779b97f4a7c15ull);
  h = mix(h ^ static_cast<uint64_t>(sequence));
  h = mix(h ^ static_cast<uint64_t>(step));
  h = mix(h ^ static_cast<uint64_t>(token));
  // 53 bits, offset by half a step: u in (0, 1), never 0 or 1.
  const double u = (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
  return static_cast<float>(-std::log(-std::log(u)));
}

std::vector<int32_t> chooseNextTokens(const Mesh &mesh, const float *logits,
                                      const VocabShard &shard, int64_t batch,
                                      const SamplingOptions &opt,
                                      int64_t step) {
  const int64_t V = shard.localVocab;
  const bool greedy = opt.temperature == 0;
  std::vector<float> z = scaledLogits(logits, shard, batch, opt.temperature);
  std::vector<float> best(kCandidateFloats * batch);
  for (int64_t b = 0; b < batch; ++b) {
    bool finite = true;
    forEachColumn(shard, [&](int64_t local, int64_t) {
      finite &= std::isfinite(logits[b * V + local]);
    });
    best[kCandidateFloats * b + 2] = finite ? 0.0f : 1.0f;
  }
  if (!greedy && opt.topK > 0 && opt.topK < shard.validVocab)
    keepTopK(mesh, z, V, batch, opt.topK);
  if (!greedy && opt.topP < 1.0)
    keepTopP(mesh, z, V, batch, opt.topP);
  for (int64_t b = 0; b < batch; ++b) {
    float score = kDropped;
    int64_t id = std::numeric_limits<int32_t>::max();
    forEachColumn(shard, [&](int64_t local, int64_t global) {
      const float s = z[b * V + local];
      if (s == kDropped)
        return;
      const float candidate =
          greedy ? s : s + gumbelNoise(opt.seed, b, step, global);
      if (candidate > score || (candidate == score && global < id)) {
        score = candidate;
        id = global;
      }
    });
    best[kCandidateFloats * b] = score;
    best[kCandidateFloats * b + 1] = static_cast<float>(id);
  }
  const int64_t ranks = mesh.axisSize(MRT_AXIS_TP);
  std::vector<float> all(ranks * kCandidateFloats * batch);
  mesh.allGather(MRT_AXIS_TP, best.data(), all.data(),
                 kCandidateFloats * batch);
  std::vector<int32_t> next(batch);
  for (int64_t b = 0; b < batch; ++b) {
    float score = kDropped, id = 0;
    bool finite = true;
    for (int64_t r = 0; r < ranks; ++r) {
      const float *c = &all[(r * batch + b) * kCandidateFloats];
      finite &= c[2] == 0.0f;
      if (c[0] > score || (c[0] == score && c[1] < id))
        score = c[0], id = c[1];
    }
    if (!finite || score == kDropped)
      throw std::runtime_error(
          "the logits of sequence " + std::to_string(b) + " at step " +
          std::to_string(step) + " are not finite: no token to choose");
    next[b] = static_cast<int32_t>(id);
  }
  return next;
}

} // namespace mrun
