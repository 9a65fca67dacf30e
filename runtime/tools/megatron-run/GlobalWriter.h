// Writing GLOBAL (checkpoint-shaped) tensors of manifest args, gathered from
// every rank's slices, into one safetensors file written by rank 0.
#ifndef MEGATRON_RUN_GLOBALWRITER_H
#define MEGATRON_RUN_GLOBALWRITER_H

#include "Buffers.h"
#include "Checkpoint.h"
#include "Manifest.h"
#include "Mesh.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mrun {

// Streams the gathered tensors into PATH atomically (PATH.tmp, then rename;
// the .tmp is removed on failure). Every method is collective: all ranks
// call them in the same order with the same arguments; none has the
// collective deadline, since the others wait while rank 0 writes.
class GlobalWriter {
public:
  GlobalWriter(const Mesh &mesh, const Manifest &m, Buffers &buffers)
      : mesh_(mesh), m_(m), buffers_(buffers) {}

  // Creates PATH.tmp with the header of `tensors` (name, checkpoint shape) on
  // rank 0. True on every rank iff it worked.
  bool open(const std::string &path,
            const std::vector<SafetensorsWriter::Tensor> &tensors,
            const std::map<std::string, std::string> &metadata,
            Values values);

  // Gathers arg `arg` (its local buffers, all-gathered over the axes that
  // split it) and writes it on rank 0, un-sliced with padding dropped, as
  // the next tensor of the file. A failure on rank 0 drops the file but the
  // gathering goes on; it is reported by agreeOk() / commit().
  void write(int arg);

  // True on every rank iff no rank failed so far.
  bool agreeOk() {
    const Mesh::UnboundedWait waiting(mesh_);
    return mesh_.agree(failure_);
  }

  // Finishes the file (fsync, rename). True on every rank iff it was
  // written completely.
  bool commit();

private:
  // Every rank's `n` elements at `local` along `axis`, all-gathered into
  // `out`: rank r's start at r * n.
  void gather(int axis, const float *local, int64_t n,
              std::vector<float> &out);

  const Mesh &mesh_;
  const Manifest &m_;
  Buffers &buffers_;
  std::unique_ptr<SafetensorsWriter> writer_; // rank 0 only
  std::string failure_;
  std::vector<float> overTp_, overDp_, chunk_, full_;
};

struct SavedTensor {
  std::string name; // in the file
  int arg;          // index into the manifest's args
};

// Writes the given args' global tensors, in this order, as one safetensors
// file (collective; true on every rank iff the file was written).
bool saveGlobal(const Mesh &mesh, const Manifest &m, Buffers &buffers,
                const std::string &path, const std::vector<SavedTensor> &list,
                const std::map<std::string, std::string> &metadata,
                Values values);

} // namespace mrun

#endif // MEGATRON_RUN_GLOBALWRITER_H
