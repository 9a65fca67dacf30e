#include "GlobalWriter.h"

#include "Slicing.h"

#include <algorithm>
#include <cstring>
#include <exception>

namespace mrun {

bool GlobalWriter::open(const std::string &path,
                        const std::vector<SafetensorsWriter::Tensor> &tensors,
                        const std::map<std::string, std::string> &metadata,
                        Values values) {
  const Mesh::UnboundedWait creating(mesh_);
  if (mesh_.rank0()) {
    try {
      writer_ = std::make_unique<SafetensorsWriter>(path, tensors, metadata,
                                                    values);
    } catch (const std::exception &e) {
      failure_ = e.what();
    }
  }
  return mesh_.agree(failure_);
}

void GlobalWriter::gather(int axis, const float *local, int64_t n,
                          std::vector<float> &out) {
  const int64_t ranks = mesh_.axisSize(axis);
  out.resize(static_cast<size_t>(ranks * n));
  const int64_t piece = int64_t(1) << 26; // counts must fit in an int
  for (int64_t off = 0; off < n; off += piece) {
    const int64_t c = std::min(piece, n - off);
    if (c == n) {
      mesh_.allGather(axis, local, out.data(), n);
      break;
    }
    chunk_.resize(static_cast<size_t>(ranks * c));
    mesh_.allGather(axis, local + off, chunk_.data(), c);
    for (int64_t r = 0; r < ranks; ++r)
      std::memcpy(out.data() + r * n + off, chunk_.data() + r * c,
                  c * sizeof(float));
  }
}

void GlobalWriter::write(int arg) {
  const Mesh::UnboundedWait writing(mesh_);
  const Arg &a = m_.args[arg];
  buffers_.download(arg);
  // A split arg is gathered over its axes, tp then dp, so that rank
  // (d, t)'s elements start at (d * tp' + t) * n; the others are whole on
  // every rank.
  auto splitOver = [&](const char *axis) {
    return std::any_of(a.splits.begin(), a.splits.end(),
                       [&](const Split &sp) { return sp.axis == axis; });
  };
  const int64_t n = a.localElements();
  const int64_t tp = splitOver(MGT_AXIS_NAME_TP) ? mesh_.tpSize() : 1;
  const int64_t dp = splitOver(MGT_AXIS_NAME_DP) ? mesh_.dpSize() : 1;
  const float *all = buffers_.host<float>(arg);
  if (tp > 1) {
    gather(MRT_AXIS_TP, all, n, overTp_);
    all = overTp_.data();
  }
  if (dp > 1) {
    gather(MRT_AXIS_DP, all, tp * n, overDp_);
    all = overDp_.data();
  }
  if (!mesh_.rank0() || !writer_)
    return;
  const int64_t count = numElements(a.checkpointShape);
  full_.assign(static_cast<size_t>(count), 0.0f);
  for (int64_t d = 0; d < dp; ++d)
    for (int64_t t = 0; t < tp; ++t)
      unsliceTensor(a.slice(mesh_.tpSize(), t, mesh_.dpSize(), d),
                    all + (d * tp + t) * n, full_.data());
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
                const std::map<std::string, std::string> &metadata,
                Values values) {
  GlobalWriter out(mesh, m, buffers);
  std::vector<SafetensorsWriter::Tensor> tensors;
  for (const SavedTensor &t : list)
    tensors.push_back({t.name, m.args[t.arg].checkpointShape});
  if (!out.open(path, tensors, metadata, values))
    return false;
  for (const SavedTensor &t : list)
    out.write(t.arg);
  return out.commit();
}

} // namespace mrun
