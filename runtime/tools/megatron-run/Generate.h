// Generation: a generation step library (megatron-compile --generate)
// continues prompts token by token. The prompts fill the KV cache in chunks
// of the step's seq tokens (mgt_prefill), then every sequence takes one new
// token per call (mgt_decode), all in lockstep; Sampling.h picks each token
// from the vocabulary-parallel logits.
#ifndef MEGATRON_RUN_GENERATE_H
#define MEGATRON_RUN_GENERATE_H

#include "Prompts.h"
#include "Session.h"

#include <cstdint>
#include <vector>

namespace mrun {

// Where prefill chunk `chunk` starts: chunks of `seq` tokens from position
// 0, the last moved back to end at the cache's `ctx` (recomputing a few
// positions is harmless: a position's keys depend on the tokens up to it).
int64_t chunkStart(int64_t chunk, int64_t seq, int64_t ctx);

// The prefill chunks that cover prompts of at most `longest` tokens.
int64_t prefillChunks(int64_t longest, int64_t seq, int64_t ctx);

// Collective: reads and checks the prompts, then prepares the session (the
// weights; prepare()), runs the generation and prints (rank 0) the text as
// it grows and the final JSON line. False on every rank if any rank failed.
bool generate(Session &s);

} // namespace mrun

#endif // MEGATRON_RUN_GENERATE_H
