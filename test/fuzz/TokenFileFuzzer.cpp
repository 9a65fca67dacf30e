//===- TokenFileFuzzer.cpp - libFuzzer target: token files ---------------===//
//
// Each input is a token file (llm.c header or raw uint16), opened, validated
// and batched as megatron-run does for a step of batch 2 x seq 3 with 300
// valid ids, at the first steps and at one so large that its first token
// wraps around the file. Every input must end in the file's tokens or in a
// std::runtime_error naming the file; any other exception, a crash or a
// sanitizer report is a bug.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "TokenData.h"

#include <cstdint>
#include <stdexcept>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  constexpr int64_t batch = 2, seq = 3, validVocab = 300, steps = 4;
  const fuzz::BytesFile bytes(data, size);
  try {
    const mrun::TokenFile file(bytes.path());
    file.validate(batch, seq, validVocab,
                  mrun::tokensUsed(steps, batch, seq));
    std::vector<int32_t> inputs(batch * seq), targets(batch * seq);
    for (int64_t step : {int64_t{0}, int64_t{1}, steps - 1, INT64_MAX / 2})
      file.batch(step, batch, seq, validVocab, inputs.data(), targets.data());
  } catch (const std::runtime_error &) {
  }
  return 0;
}
