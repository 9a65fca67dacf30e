#include "Generate.h"

#include "Report.h"
#include "Sampling.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <string>

namespace mrun {

int64_t chunkStart(int64_t chunk, int64_t seq, int64_t ctx) {
  return std::min(chunk * seq, ctx - seq);
}

int64_t prefillChunks(int64_t longest, int64_t seq, int64_t ctx) {
  int64_t chunks = 1;
  while (chunkStart(chunks - 1, seq, ctx) + seq < longest)
    ++chunks;
  return chunks;
}

namespace {

// The batch's rows: prompt b in row b, and rows without a prompt (fewer
// prompts than the step's batch) running a one-token dummy whose tokens are
// never reported.
struct Rows {
  std::vector<Prompt> prompts;            // one per row
  size_t real = 0;                        // rows [0, real) hold prompts
  std::vector<std::vector<int32_t>> next; // per row: the new tokens

  int64_t length(int64_t b) const {
    return static_cast<int64_t>(prompts[b].size());
  }
};

Rows batchRows(std::vector<Prompt> prompts, int64_t batch) {
  Rows rows;
  rows.real = prompts.size();
  rows.prompts = std::move(prompts);
  rows.prompts.resize(batch, Prompt{0});
  rows.next.resize(batch);
  return rows;
}

// This rank's vocabulary columns of the logits.
VocabShard vocabShard(const Session &s) {
  const Arg &logits = s.m.args[s.m.logits];
  VocabShard shard;
  shard.columns = logits.slice(s.mesh.tpSize(), s.mesh.tpRank()).dims[1];
  shard.localVocab = logits.localShape[1];
  shard.validVocab = s.m.validVocab;
  return shard;
}

// A token as text for the user; ids the tokenizer does not know (a model
// with a larger vocabulary than the byte tokenizer's) as <|id|>.
std::string tokenText(const mtok::Tokenizer &tokenizer, int32_t id) {
  return id < tokenizer.vocabSize() ? tokenizer.decodeToken(id)
                                    : "<|" + std::to_string(id) + "|>";
}

std::string promptText(const mtok::Tokenizer &tokenizer, const Prompt &p) {
  std::string text;
  for (int32_t id : p)
    text += tokenText(tokenizer, id);
  return text;
}

class Generator {
public:
  Generator(Session &s, Rows &rows, const mtok::Tokenizer &tokenizer)
      : s_(s), m_(s.m), rows_(rows), tokenizer_(tokenizer),
        shard_(vocabShard(s)),
        sampling_{s.opt.temperature, s.opt.topK, s.opt.topP, s.opt.seed} {}

  // The prompts into the cache and the first new token of each.
  void prefill() {
    const int64_t B = m_.batch, T = m_.seq;
    int64_t longest = 0;
    for (int64_t b = 0; b < B; ++b)
      longest = std::max(longest, rows_.length(b));
    for (int64_t c = 0; c < prefillChunks(longest, T, m_.ctx); ++c) {
      const int64_t start = chunkStart(c, T, m_.ctx);
      auto *tokens = s_.buffers.host<int32_t>(m_.tokens);
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t t = 0; t < T; ++t)
          tokens[b * T + t] =
              start + t < rows_.length(b) ? rows_.prompts[b][start + t] : 0;
        setRow(b, start, rows_.length(b) - 1 - start, T);
      }
      s_.buffers.upload(m_.tokens);
      const std::vector<int32_t> chosen = call(s_.step.prefill, 0);
      for (int64_t b = 0; b < B; ++b)
        if (rows_.length(b) - 1 >= start && rows_.length(b) - 1 < start + T)
          append(b, chosen[b]);
    }
  }

  // One new token per sequence, token k + 1 from the k-th new one.
  void decode(int64_t k) {
    auto *next = s_.buffers.host<int32_t>(m_.nextTokens);
    for (int64_t b = 0; b < m_.batch; ++b) {
      next[b] = rows_.next[b][k];
      setRow(b, rows_.length(b) + k, 0, 1);
    }
    s_.buffers.upload(m_.nextTokens);
    const std::vector<int32_t> chosen = call(s_.step.decode, k + 1);
    for (int64_t b = 0; b < m_.batch; ++b)
      append(b, chosen[b]);
  }

private:
  // Row b's chunk starts at `position`; its logits are those of column
  // `last` (clamped into the chunk of `width` tokens).
  void setRow(int64_t b, int64_t position, int64_t last, int64_t width) {
    s_.buffers.host<int32_t>(m_.positions)[b] = static_cast<int32_t>(position);
    s_.buffers.host<int32_t>(m_.lastIndex)[b] =
        static_cast<int32_t>(std::clamp<int64_t>(last, 0, width - 1));
  }

  // Runs `entry` on the buffers, then chooses every row's next token.
  std::vector<int32_t> call(mgt_function_fn entry, int64_t step) {
    s_.buffers.upload(m_.positions);
    s_.buffers.upload(m_.lastIndex);
    entry(s_.mesh.context(), s_.buffers.stepArgs());
    s_.buffers.download(m_.logits);
    return chooseNextTokens(s_.mesh, s_.buffers.host<float>(m_.logits), shard_,
                            m_.batch, sampling_, step);
  }

  // A new token of row b; one prompt's text grows on rank 0's stdout.
  void append(int64_t b, int32_t id) {
    rows_.next[b].push_back(id);
    if (s_.mesh.rank0() && rows_.real == 1 && b == 0) {
      std::fputs(tokenText(tokenizer_, id).c_str(), stdout);
      std::fflush(stdout);
    }
  }

  Session &s_;
  const Manifest &m_;
  Rows &rows_;
  const mtok::Tokenizer &tokenizer_;
  const VocabShard shard_;
  const SamplingOptions sampling_;
};

// How long generation took: all of it, and the decode steps alone.
struct Timing {
  double seconds = 0, decodeSeconds = 0;
};

// The last line: {"generated", "prompt_tokens", "new_tokens",
// "tokens_per_second", "decode_tokens_per_second"}, counting the prompts'
// rows only; the decode rate leaves out each prompt's first new token,
// which prefill chose.
std::string resultLine(const Rows &rows, const Timing &time) {
  nlohmann::json generated = nlohmann::json::array();
  int64_t promptTokens = 0, newTokens = 0;
  for (size_t b = 0; b < rows.real; ++b) {
    generated.push_back(rows.next[b]);
    promptTokens += rows.length(b);
    newTokens += static_cast<int64_t>(rows.next[b].size());
  }
  const int64_t decoded = newTokens - static_cast<int64_t>(rows.real);
  nlohmann::json line = {
      {"generated", generated},
      {"prompt_tokens", promptTokens},
      {"new_tokens", newTokens},
      {"tokens_per_second", newTokens / time.seconds},
      {"decode_tokens_per_second",
       time.decodeSeconds > 0 ? decoded / time.decodeSeconds : 0.0}};
  return line.dump();
}

} // namespace

bool generate(Session &s) {
  std::unique_ptr<mtok::Tokenizer> tokenizer;
  std::vector<Prompt> prompts;
  std::string failure;
  try {
    tokenizer = mtok::makeTokenizer(s.opt.tokenizer);
    prompts = readPrompts(s.opt, *tokenizer);
    checkPrompts(prompts, s.m, s.opt.maxNew);
  } catch (const std::exception &e) {
    failure = e.what();
  }
  if (!s.mesh.agree(failure) || !prepare(s))
    return false;
  Rows rows = batchRows(std::move(prompts), s.m.batch);
  if (s.mesh.rank0() && rows.real == 1) {
    std::fputs(promptText(*tokenizer, rows.prompts[0]).c_str(), stdout);
    std::fflush(stdout);
  }
  // Sampling fails alike on every rank (it decides on gathered values), so
  // a failure needs no agreement beyond this one.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point begin = Clock::now();
  Clock::time_point decoding = begin;
  try {
    Generator generator(s, rows, *tokenizer);
    generator.prefill();
    decoding = Clock::now();
    for (int64_t k = 0; k + 1 < s.opt.maxNew; ++k)
      generator.decode(k);
  } catch (const std::exception &e) {
    failure = e.what();
  }
  const Clock::time_point end = Clock::now();
  const Timing time{std::chrono::duration<double>(end - begin).count(),
                    std::chrono::duration<double>(end - decoding).count()};
  // The streamed text ends its line before anything else is printed, an
  // error on stderr included.
  if (s.mesh.rank0() && rows.real == 1)
    printLine("\n");
  if (!s.mesh.agree(failure))
    return false;
  if (!s.mesh.rank0())
    return true;
  if (rows.real != 1)
    for (size_t b = 0; b < rows.real; ++b)
      printLine("[" + std::to_string(b) + "] " +
                promptText(*tokenizer, rows.prompts[b]) +
                promptText(*tokenizer, rows.next[b]) + "\n");
  printLine(resultLine(rows, time) + "\n");
  return true;
}

} // namespace mrun
