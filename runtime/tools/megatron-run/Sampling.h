// Vocabulary-parallel choice of the next token: each tensor-parallel rank
// holds the logits of its vocabulary columns only, and no rank ever gathers
// a full row. The ranks exchange per sequence a few numbers: the best
// candidate of each (greedy, sampling), their local top-k values (top-k) and
// the probability mass above a threshold (top-p).
//
// Sampling is Gumbel-max: token v of sequence b at step s wins when
// z_v + g_v is largest, z = logits / temperature and g_v Gumbel noise
// hashed from (seed, b, s, v), the global token id. The noise of a token
// does not depend on which rank holds it, so the same seed picks the same
// tokens at every TP size (given the same logits), and the choice is a draw
// from softmax(z) restricted to the tokens top-k and top-p keep.
#ifndef MEGATRON_RUN_SAMPLING_H
#define MEGATRON_RUN_SAMPLING_H

#include "Mesh.h"
#include "Slicing.h"

#include <cstdint>
#include <vector>

namespace mrun {

struct SamplingOptions {
  double temperature = 1.0; // 0: greedy (the lowest id among equal maxima)
  int64_t topK = 0;         // 0: no limit
  double topP = 1.0;        // 1: no limit
  uint64_t seed = 0;
};

// This rank's columns of a [batch, padded vocab] logits tensor split over
// tp: local column `local` of an interval is global token `global`; tokens
// at or past validVocab are padding, never chosen.
struct VocabShard {
  std::vector<Interval> columns;
  int64_t localVocab = 0;
  int64_t validVocab = 0;
};

// The Gumbel noise of token `token` of sequence `sequence` at step `step`:
// -log(-log(u)) for u uniform in (0, 1) from a hash of the four.
float gumbelNoise(uint64_t seed, int64_t sequence, int64_t step, int64_t token);

// Collective over tp: the next token of each of the `batch` sequences from
// this rank's logits [batch, shard.localVocab] (host memory). The same on
// every rank.
std::vector<int32_t> chooseNextTokens(const Mesh &mesh, const float *logits,
                                      const VocabShard &shard, int64_t batch,
                                      const SamplingOptions &opt,
                                      int64_t step);

} // namespace mrun

#endif // MEGATRON_RUN_SAMPLING_H
