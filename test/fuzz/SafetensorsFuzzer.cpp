//===- SafetensorsFuzzer.cpp - libFuzzer target: checkpoints -------------===//
//
// Each input is a safetensors file, read as megatron-run reads a checkpoint
// for a small model split over tp=2 (a row-split matrix "w" and a replicated
// vector "b", with their AdamW state): the header under both name schemes,
// the check against the model with and without the optimizer state, then
// every tensor's slice on both ranks (dtype conversion, the non-finite
// check). Every input must end in data or in a std::runtime_error naming the
// file; any other exception, a crash or a sanitizer report is a bug.
//
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"
#include "FuzzInput.h"

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace {

const mrun::Manifest &model() {
  static const mrun::Manifest manifest = mrun::parseManifest(R"({
    "format": "megatron-step", "version": 6, "model": "fuzz", "target": "cpu",
    "dp": 1, "tp": 2, "batch": 1, "seq": 2, "valid_vocab": 4,
    "entries": ["forward", "train_step"],
    "args": [
      {"name": "w", "role": "param", "dtype": "f32", "memory": "host",
       "global_shape": [8, 4], "local_shape": [4, 4],
       "checkpoint_shape": [8, 4],
       "split": [{"axis": "tp", "dim": 0, "sections": 1}]},
      {"name": "b", "role": "param", "dtype": "f32", "memory": "host",
       "global_shape": [4], "local_shape": [4], "checkpoint_shape": [3],
       "split": []},
      {"name": "w.exp_avg", "role": "adam_m", "param": "w", "dtype": "f32",
       "memory": "host", "global_shape": [8, 4], "local_shape": [4, 4],
       "checkpoint_shape": [8, 4],
       "split": [{"axis": "tp", "dim": 0, "sections": 1}]},
      {"name": "w.exp_avg_sq", "role": "adam_v", "param": "w", "dtype": "f32",
       "memory": "host", "global_shape": [8, 4], "local_shape": [4, 4],
       "checkpoint_shape": [8, 4],
       "split": [{"axis": "tp", "dim": 0, "sections": 1}]},
      {"name": "b.exp_avg", "role": "adam_m", "param": "b", "dtype": "f32",
       "memory": "host", "global_shape": [4], "local_shape": [4],
       "checkpoint_shape": [3], "split": []},
      {"name": "b.exp_avg_sq", "role": "adam_v", "param": "b", "dtype": "f32",
       "memory": "host", "global_shape": [4], "local_shape": [4],
       "checkpoint_shape": [3], "split": []},
      {"name": "ids", "role": "tokens", "dtype": "i32", "memory": "host",
       "global_shape": [1, 2], "local_shape": [1, 2],
       "checkpoint_shape": [1, 2], "split": []},
      {"name": "next", "role": "targets", "dtype": "i32", "memory": "host",
       "global_shape": [1, 2], "local_shape": [1, 2],
       "checkpoint_shape": [1, 2], "split": []},
      {"name": "hp", "role": "hyperparameters", "dtype": "f32",
       "memory": "host", "global_shape": [8], "local_shape": [8],
       "checkpoint_shape": [8], "split": []}
    ]})");
  return manifest;
}

// What --init-from (weights) or --resume (with the AdamW state) reads.
void readModel(const mrun::Checkpoint &checkpoint, bool optimizer) {
  const mrun::Manifest &m = model();
  checkpoint.checkAgainst(m, optimizer);
  for (const mrun::Arg &arg : m.args) {
    if (arg.role != MGT_ROLE_PARAM && !(optimizer && arg.isAdamState()))
      continue;
    const std::string name =
        arg.isAdamState() ? mrun::Checkpoint::optimizerName(arg.param, arg.role)
                          : arg.name;
    std::vector<float> local(arg.localElements());
    for (int64_t rank = 0; rank < m.tp; ++rank)
      checkpoint.readSlice(name, arg.slice(m.tp, rank), local.data());
  }
}

void readAs(const std::string &path, const char *scheme) {
  try {
    const mrun::Checkpoint checkpoint(path, mrun::checkpointNamesFor(scheme));
    for (bool optimizer : {false, true}) {
      try {
        readModel(checkpoint, optimizer);
      } catch (const std::runtime_error &) {
      }
    }
  } catch (const std::runtime_error &) {
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const fuzz::BytesFile file(data, size);
  readAs(file.path(), "");
  readAs(file.path(), MGT_CHECKPOINT_NAMES_HF_GPT2);
  return 0;
}
