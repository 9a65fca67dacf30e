// Token files and the batching rule of utils/gpt2_reference/tokens_io.py.
//
// Formats (chosen by the first int32): llm.c shards, a 256 x int32 header
// (magic, version, token count) then uint16 tokens (magic 20240520) or
// uint32 ones (20240801, Llama 3's vocabulary); otherwise raw little-endian
// uint16 tokens. Batch s of [B,T] takes the tokens at indices
// (s*B*T + j) mod count for j in [0, B*T]: inputs are the first B*T, targets
// the same shifted by one.
#ifndef MEGATRON_RUN_TOKEN_DATA_H
#define MEGATRON_RUN_TOKEN_DATA_H

#include "InputFile.h"
#include "TokenFileFormat.h"

#include <cstdint>
#include <string>

namespace mrun {

class TokenFile {
public:
  // Opens and checks the header against the file size. Throws
  // std::runtime_error naming the file.
  explicit TokenFile(const std::string &path);
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;

  int64_t count() const { return count_; }
  bool isLlmc() const { return llmc_; }
  const std::string &path() const { return file_.path(); }

  // Checks that the file has at least B*T+1 tokens, that its tokens are
  // wide enough for ids below validVocab (a 16-bit file for a vocabulary
  // past 65536 ids is refused), and that the tokens at indices
  // [0, min(count, uses)) are < validVocab (streamed, bounded memory).
  void validate(int64_t batch, int64_t seq, int64_t validVocab,
                int64_t uses) const;

  // Batch `step` into inputs[B*T], targets[B*T]; throws on a token id >=
  // validVocab (naming the file, the token's position and its id).
  void batch(int64_t step, int64_t batch, int64_t seq, int64_t validVocab,
             int32_t *inputs, int32_t *targets) const;

private:
  InputFile file_; // errors: "data PATH: ..."
  bool llmc_ = false;
  // The tokens' layout; raw files are 16-bit.
  const mtok::TokenFileLayout *layout_ = &mtok::kTokens16;
  int64_t count_ = 0;
  uint64_t dataStart_ = 0;
  // tokens [first, first + n) of the file (no wrap-around), n > 0.
  void read(int64_t first, int64_t n, uint32_t *out) const;
  void checkToken(uint32_t id, int64_t position, int64_t validVocab) const;
};

// How many token positions batches [0, steps) of [batch, seq] read (the
// `uses` of validate()): steps * batch * seq + 1, at most INT64_MAX.
int64_t tokensUsed(int64_t steps, int64_t batch, int64_t seq);

} // namespace mrun

#endif // MEGATRON_RUN_TOKEN_DATA_H
