#include "GlobalWriter.h"

#include "Slicing.h"

#include <algorithm>
#include <cstring>
#include <exception>

namespace mrun {

bool GlobalWriter::open(const std::string &path,
                        const std::vector<SafetensorsWriter::Tensor> &tensors,
                        const std::map<std::string, std::string> &metadata) {
  const Mesh::UnboundedWait creating(mesh_);
  if (mesh_.rank0()) {
    try {
      writer_ = std::make_unique<SafetensorsWriter>(path, tensors, metadata);
    } catch (const std::exception &e) {
      failure_ = e.what();
    }
  }
  return mesh_.agree(failure_);
}

const float *GlobalWriter::gather(int arg) {
  const int64_t n = m_.args[arg].localElements();
  const int64_t tp = mesh_.tpSize();
  const float *local = buffers_.host<float>(arg);
  gathered_.resize(static_cast<size_t>(tp * n));
  const int64_t piece = int64_t(1) << 26; // counts must fit in an int
  for (int64_t off = 0; off < n; off += piece) {
    const int64_t c = std::min(piece, n - off);
    if (c == n) {
      mesh_.allGather(local, gathered_.data(), n);
      break;
    }
    chunk_.resize(static_cast<size_t>(tp * c));
    mesh_.allGather(local + off, chunk_.data(), c);
    for (int64_t r = 0; r < tp; ++r)
      std::memcpy(gathered_.data() + r * n + off, chunk_.data() + r * c,
                  c * sizeof(float));
  }
  return gathered_.data();
}

void GlobalWriter::write(int arg) {
  const Mesh::UnboundedWait writing(mesh_);
  const Arg &a = m_.args[arg];
  buffers_.download(arg);
  // A split arg is gathered from every TP rank; the others are whole on
  // every rank.
  const int64_t ranks = a.splits.empty() ? 1 : mesh_.tpSize();
  const float *all = ranks > 1 ? gather(arg) : buffers_.host<float>(arg);
  if (!mesh_.rank0() || !writer_)
    return;
  const int64_t n = a.localElements();
  const int64_t count = numElements(a.checkpointShape);
  full_.assign(static_cast<size_t>(count), 0.0f);
  for (int64_t r = 0; r < ranks; ++r)
    unsliceTensor(a.slice(mesh_.tpSize(), r), all + r * n, full_.data());
  try {
    writer_->write(full_.data(), count);
  } catch (const std::exception &e) {
    failure_ = e.what();
    writer_.reset(); // removes PATH.tmp; keep gathering with the others
  }
}

bool GlobalWriter::commit() {
  const Mesh::UnboundedWait syncing(mesh_);
  if (mesh_.rank0() && writer_) {
    try {
      writer_->commit();
    } catch (const std::exception &e) {
      failure_ = e.what();
    }
    writer_.reset();
  }
  return mesh_.agree(failure_);
}

bool saveGlobal(const Mesh &mesh, const Manifest &m, Buffers &buffers,
                const std::string &path, const std::vector<SavedTensor> &list,
                const std::map<std::string, std::string> &metadata) {
  GlobalWriter out(mesh, m, buffers);
  std::vector<SafetensorsWriter::Tensor> tensors;
  for (const SavedTensor &t : list)
    tensors.push_back({t.name, m.args[t.arg].checkpointShape});
  if (!out.open(path, tensors, metadata))
    return false;
  for (const SavedTensor &t : list)
    out.write(t.arg);
  return out.commit();
}

} // namespace mrun
