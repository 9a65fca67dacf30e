// Reading a rank's slices of a global GPT-2 safetensors checkpoint.
#ifndef MEGATRON_RUN_CHECKPOINT_H
#define MEGATRON_RUN_CHECKPOINT_H

#include "Manifest.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mrun {

class Checkpoint {
public:
  struct Entry {
    std::string fileName; // as in the file (maybe with "transformer.")
    std::string dtype;    // safetensors dtype string
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0; // relative to the data section
  };

  // Opens the file and reads its header only. Hugging Face GPT-2 names are
  // accepted with or without "transformer."; h.N.attn.bias /
  // h.N.attn.masked_bias buffers and lm_head.weight (tied to wte) are
  // skipped. Throws std::runtime_error naming the file.
  explicit Checkpoint(const std::string &path);
  ~Checkpoint();
  Checkpoint(const Checkpoint &) = delete;
  Checkpoint &operator=(const Checkpoint &) = delete;

  // Every param of the manifest must be in the file with its checkpoint_shape
  // and a float dtype (F32; F16, BF16, F64 converted); a tensor of the file
  // that is not in the model is an error too (a checkpoint of another model).
  void checkAgainst(const Manifest &manifest) const;

  // Reads this rank's slice of `arg` (only the bytes it needs) into out;
  // padding is zero.
  void readSlice(const Arg &arg, const TensorSlice &slice, float *out) const;

  const std::map<std::string, Entry> &entries() const { return entries_; }

private:
  std::string path_;
  int fd_ = -1;
  uint64_t dataStart_ = 0, dataSize_ = 0;
  std::map<std::string, Entry> entries_; // canonical name -> entry
  void preadAll(void *buf, uint64_t bytes, uint64_t offset,
                const std::string &tensor) const;
};

} // namespace mrun

#endif // MEGATRON_RUN_CHECKPOINT_H
