// Reading a rank's slices of a global safetensors checkpoint: one file, or
// Hugging Face's split checkpoints (an index of which file holds each
// tensor).
#ifndef MEGATRON_RUN_CHECKPOINT_H
#define MEGATRON_RUN_CHECKPOINT_H

#include "CheckpointNames.h"
#include "InputFile.h"
#include "Manifest.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mrun {

class Checkpoint {
public:
  struct Entry {
    std::string fileName; // as in the file
    std::string dtype;    // safetensors dtype string
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0; // relative to the data section
    size_t shard = 0;            // the file that holds it
  };

  // Opens the checkpoint and reads its headers only: `path` is a
  // safetensors file, an index (model.safetensors.index.json: {"weight_map":
  // {tensor: file}}, the files beside it), or a folder holding either
  // (model.safetensors.index.json first, then model.safetensors), as
  // Hugging Face publishes them. `names` maps the files' tensor names to
  // the model's (the family's published checkpoints, see CheckpointNames.h);
  // "optimizer.*" tensors (AdamW state written by --save) keep their full
  // name. Throws std::runtime_error naming the file.
  Checkpoint(const std::string &path, CheckpointNames names);
  Checkpoint(const Checkpoint &) = delete;
  Checkpoint &operator=(const Checkpoint &) = delete;

  // Every param of the manifest must be in the file with its checkpoint_shape
  // and a float dtype (F32; F16, BF16, F64 converted); a tensor of the file
  // that is not in the model is an error too (a checkpoint of another model).
  // "optimizer.*" tensors are ignored unless `optimizer`: then the AdamW
  // state of every param ("optimizer.<param>.exp_avg" / ".exp_avg_sq") must
  // be there too (and no other "optimizer.*" tensor).
  void checkAgainst(const Manifest &manifest, bool optimizer = false) const;

  // Reads this rank's slice of tensor `name` (canonical name; only the bytes
  // it needs) into out; padding is zero.
  void readSlice(const std::string &name, const TensorSlice &slice,
                 float *out) const;
  void readSlice(const Arg &arg, const TensorSlice &slice, float *out) const {
    readSlice(arg.name, slice, out);
  }

  const std::map<std::string, Entry> &entries() const { return entries_; }
  // "__metadata__" (string values; other JSON values as their dump).
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  const std::string &path() const { return path_; }

  // The file name of the AdamW state of parameter `param` (role adam_m or
  // adam_v): "optimizer.<param>.exp_avg" / "optimizer.<param>.exp_avg_sq".
  static std::string optimizerName(const std::string &param,
                                   const std::string &role);

private:
  // One safetensors file of the checkpoint.
  struct Shard {
    explicit Shard(const std::string &path) : file("checkpoint", path) {}
    InputFile file; // errors: "checkpoint PATH: ..."
    uint64_t dataStart = 0, dataSize = 0;
  };
  std::string path_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::map<std::string, Entry> entries_; // canonical name -> entry
  std::map<std::string, std::string> metadata_;

  // Throws "checkpoint PATH: msg" for the path the checkpoint was opened by.
  [[noreturn]] void fail(const std::string &msg) const;
  // Opens `file` as the next shard and reads its header into the entries.
  void readShard(const std::string &file, CheckpointNames names);
  // The files of index `index` (their tensors checked against its map).
  void readIndex(const std::string &index, CheckpointNames names);
};

// Writes a safetensors file of F32 tensors, atomically: the data goes to
// PATH.tmp, which commit() flushes, fsyncs and renames to PATH; destroying an
// uncommitted writer removes PATH.tmp (PATH itself is untouched until the
// rename). The header lists the tensors in the given order (data in that
// order) and is padded with spaces to a multiple of 8 bytes. Throws
// std::runtime_error naming the file.
// The "format" in the metadata of the files megatron-run writes.
inline constexpr const char *kCheckpointFormat = "megatron-mlir";

// What a writer takes: a checkpoint only finite values (with a NaN it would
// be a file --resume refuses, written over a good one), a dump whatever the
// run computed.
enum class Values { Any, Finite };

class SafetensorsWriter {
public:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
  };
  SafetensorsWriter(const std::string &path, const std::vector<Tensor> &tensors,
                    const std::map<std::string, std::string> &metadata,
                    Values values);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter &) = delete;
  SafetensorsWriter &operator=(const SafetensorsWriter &) = delete;

  // Throws, as a writer would, where PATH cannot be written: before a run
  // whose results would otherwise be lost at its end.
  static void checkWritable(const std::string &path);

  // The data of the next tensor (its element count, row-major).
  void write(const float *data, int64_t count);
  void commit();

private:
  std::string path_, tmp_;
  std::vector<Tensor> tensors_;
  Values values_;
  size_t next_ = 0;
  int fd_ = -1;
  bool committed_ = false;
  void writeAll(const void *buf, size_t bytes);
};

} // namespace mrun

#endif // MEGATRON_RUN_CHECKPOINT_H
