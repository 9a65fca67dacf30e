#include "Checkpoint.h"

#include "FileIO.h"
#include "JsonObject.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mrun {

using nlohmann::json;

namespace {

// safetensors limits its header to 100 MB.
constexpr uint64_t kMaxHeader = 100u << 20;

// A tensor's bytes in the data section.
struct Span {
  uint64_t begin, end;
  std::string name;
};

// Tensors whose bytes overlap would load one tensor's data as another's:
// the first such pair, or "".
std::string overlapOf(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span &a, const Span &b) {
    return a.begin < b.begin;
  });
  const Span *last = nullptr;
  for (const Span &span : spans) {
    if (span.begin == span.end)
      continue; // an empty tensor holds no bytes
    if (last && span.begin < last->end)
      return "tensors \"" + last->name + "\" and \"" + span.name +
             "\" overlap: data_offsets [" + std::to_string(last->begin) +
             ", " + std::to_string(last->end) + ") and [" +
             std::to_string(span.begin) + ", " + std::to_string(span.end) +
             ")";
    if (!last || span.end > last->end)
      last = &span;
  }
  return "";
}

size_t dtypeBytes(const std::string &dtype) {
  if (dtype == "F32")
    return 4;
  if (dtype == "F16" || dtype == "BF16")
    return 2;
  if (dtype == "F64")
    return 8;
  return 0; // not a float type we convert
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else { // subnormal: normalise
    exp = 113;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void convert(const std::string &dtype, const unsigned char *src, int64_t n,
             float *dst) {
  if (dtype == "F16" || dtype == "BF16") {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      if (dtype == "F16") {
        dst[i] = halfToFloat(h);
      } else {
        uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(&dst[i], &bits, 4);
      }
    }
  } else { // F64
    for (int64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, src + 8 * i, 8);
      dst[i] = static_cast<float>(d);
    }
  }
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The folder of `path` with a trailing slash ("" for a bare file name).
std::string folderOf(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

constexpr const char *kIndexFile = "model.safetensors.index.json";
constexpr const char *kSingleFile = "model.safetensors";

} // namespace

Checkpoint::Checkpoint(const std::string &path, CheckpointNames names)
    : path_(path) {
  std::string file = path;
  if (isDirectory(path)) {
    const std::string folder = endsWith(path, "/") ? path : path + "/";
    if (exists(folder + kIndexFile))
      file = folder + kIndexFile;
    else if (exists(folder + kSingleFile))
      file = folder + kSingleFile;
    else
      fail(std::string("a folder without ") + kIndexFile + " or " +
           kSingleFile);
  }
  if (endsWith(file, ".json"))
    readIndex(file, names);
  else
    readShard(file, names);
}

void Checkpoint::fail(const std::string &msg) const {
  throw std::runtime_error("checkpoint " + path_ + ": " + msg);
}

void Checkpoint::readIndex(const std::string &index, CheckpointNames names) {
  auto failIndex = [&](const std::string &msg) {
    throw std::runtime_error("checkpoint " + index + ": " + msg);
  };
  std::string why;
  std::optional<json> parsed =
      parseJsonObject(mfile::readFileBytes("checkpoint", index), why);
  if (!parsed)
    failIndex("the index is " + why);
  const json &map = (*parsed)["weight_map"];
  if (!map.is_object() || map.empty())
    failIndex("the index has no \"weight_map\" of tensor -> file");
  // Each file once, in the order of the first tensor (by name) it holds.
  std::vector<std::string> files;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it.value().is_string())
      failIndex("weight_map[\"" + it.key() + "\"] is not a file name");
    const std::string file = it.value().get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos)
      failIndex("weight_map[\"" + it.key() + "\"] names \"" + file +
                "\", not a file beside the index");
    if (std::find(files.begin(), files.end(), file) == files.end())
      files.push_back(file);
  }
  for (const std::string &file : files)
    readShard(folderOf(index) + file, names);
  // The map and the files agree: each tensor where the index says.
  std::map<std::string, size_t> shardOfFileName;
  for (const auto &[name, e] : entries_)
    shardOfFileName[e.fileName] = e.shard;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const auto found = shardOfFileName.find(it.key());
    const std::string file = it.value().get<std::string>();
    const bool listed = found != shardOfFileName.end();
    if (listed && shards_[found->second]->file.path() ==
                      folderOf(index) + file)
      continue;
    // A tensor the model has no parameter for (a buffer) has no entry.
    if (!listed && names(it.key()) == std::nullopt)
      continue;
    failIndex("the index puts tensor \"" + it.key() + "\" in " + file +
              (listed ? ", but " + shards_[found->second]->file.path() +
                            " holds it"
                      : ", which does not hold it"));
  }
}

void Checkpoint::readShard(const std::string &path, CheckpointNames names) {
  shards_.push_back(std::make_unique<Shard>(path));
  Shard &shard = *shards_.back();
  const InputFile &file = shard.file;
  auto fail = [&](const std::string &msg) { file.fail(msg); };
  const uint64_t fileSize = file.size();
  if (fileSize < 8)
    fail("truncated header: the file has " + std::to_string(fileSize) +
         " bytes, too short for a safetensors file");
  uint64_t headerLen = 0;
  unsigned char lenBytes[8];
  file.readExactly(lenBytes, 8, 0);
  for (int i = 7; i >= 0; --i)
    headerLen = (headerLen << 8) | lenBytes[i];
  if (headerLen > kMaxHeader)
    fail("header length " + std::to_string(headerLen) +
         " is implausible (not a safetensors file?)");
  if (8 + headerLen > fileSize)
    fail("truncated header: header length " + std::to_string(headerLen) +
         " exceeds the file size " + std::to_string(fileSize));
  std::string text(headerLen, '\0');
  file.readExactly(text.data(), headerLen, 8);
  shard.dataStart = 8 + headerLen;
  shard.dataSize = fileSize - shard.dataStart;

  std::string why;
  std::optional<json> parsed = parseJsonObject(text, why);
  if (!parsed)
    fail("header is " + why);
  const json &header = *parsed;

  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &fileName = it.key();
    if (fileName == "__metadata__") {
      if (!it.value().is_object())
        fail("__metadata__ is not a JSON object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m)
        metadata_[m.key()] =
            m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
      continue;
    }
    const json &info = it.value();
    const std::string where = "tensor \"" + fileName + "\": ";
    Entry e;
    e.fileName = fileName;
    e.shard = shards_.size() - 1;
    if (!info.is_object() || !info.contains("dtype") ||
        !info["dtype"].is_string() || !info.contains("shape") ||
        !info["shape"].is_array() || !info.contains("data_offsets") ||
        !info["data_offsets"].is_array() || info["data_offsets"].size() != 2)
      fail(where + "malformed header entry (needs dtype, shape, "
                   "data_offsets)");
    e.dtype = info["dtype"].get<std::string>();
    for (const json &d : info["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail(where + "malformed shape");
      e.shape.push_back(d.get<int64_t>());
    }
    const json &off = info["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned() ||
        off[0].get<uint64_t>() > off[1].get<uint64_t>())
      fail(where + "malformed data_offsets");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.end > shard.dataSize)
      fail(where + "data_offsets [" + std::to_string(e.begin) + ", " +
           std::to_string(e.end) + ") exceed the " +
           std::to_string(shard.dataSize) +
           "-byte data section: the data is shorter than the header says "
           "(truncated file?)");
    spans.push_back({e.begin, e.end, fileName});
    // The AdamW state megatron-run writes keeps its own names.
    std::optional<std::string> name =
        fileName.rfind("optimizer.", 0) == 0 ? fileName : names(fileName);
    if (!name)
      continue;
    auto [pos, inserted] = entries_.emplace(*name, e);
    if (!inserted)
      fail("tensor \"" + *name + "\" appears twice (\"" + pos->second.fileName +
           "\" and \"" + fileName + "\")");
  }
  if (const std::string why = overlapOf(std::move(spans)); !why.empty())
    fail(why);
}

std::string Checkpoint::optimizerName(const std::string &param,
                                      const std::string &role) {
  return "optimizer." + param +
         (role == MGT_ROLE_ADAM_M ? MGT_ADAM_M_SUFFIX : MGT_ADAM_V_SUFFIX);
}

void Checkpoint::checkAgainst(const Manifest &manifest, bool optimizer) const {
  const std::string reader =
      manifest.hasEntry(MGT_ENTRY_KIND_FUNCTION) ? "function" : "model";
  // Another model's tensors may match these names and shapes by chance.
  auto format = metadata_.find("format"), model = metadata_.find("model");
  if (format != metadata_.end() && format->second == kCheckpointFormat &&
      model != metadata_.end() && model->second != manifest.model)
    fail("a checkpoint of the model \"" + model->second +
         "\", but the step library's model is \"" + manifest.model + "\"");
  // What the run reads: a model's parameters (and AdamW state), or a
  // function's inputs.
  std::map<std::string, const Arg *> params;
  for (const Arg &a : manifest.args) {
    if (a.role == MGT_ROLE_PARAM || a.role == MGT_ROLE_INPUT)
      params[a.name] = &a;
    else if (optimizer && a.isAdamState())
      params[optimizerName(a.param, a.role)] = &a;
  }
  for (const auto &[name, arg] : params) {
    auto it = entries_.find(name);
    if (it == entries_.end() && arg->isAdamState())
      fail("tensor \"" + name + "\" is missing: --resume needs the AdamW "
           "state that megatron-run --save writes (use --init-from to load "
           "only the weights)");
    if (it == entries_.end())
      fail("tensor \"" + name + "\" is missing (the " + reader +
           " needs shape " +
           shapeString(arg->checkpointShape) + ")");
    const Entry &e = it->second;
    const std::string where = "tensor \"" + e.fileName + "\": ";
    const size_t bytes = dtypeBytes(e.dtype);
    if (bytes == 0)
      fail(where + "dtype " + e.dtype +
           " is not supported (F32 expected; F16, BF16 and F64 are "
           "converted)");
    if (e.shape != arg->checkpointShape)
      fail(where + "shape " + shapeString(e.shape) + " but the " + reader +
           " expects " +
           shapeString(arg->checkpointShape));
    const uint64_t want = static_cast<uint64_t>(numElements(e.shape)) * bytes;
    if (e.end - e.begin != want)
      fail(where + "data_offsets span " + std::to_string(e.end - e.begin) +
           " bytes, but " + e.dtype + " " + shapeString(e.shape) + " needs " +
           std::to_string(want));
  }
  std::vector<std::string> extra;
  for (const auto &[name, e] : entries_)
    if (!params.count(name) &&
        (optimizer || name.rfind("optimizer.", 0) != 0))
      extra.push_back(e.fileName);
  if (!extra.empty()) {
    std::string list;
    for (size_t i = 0; i < extra.size() && i < 5; ++i)
      list += (i ? ", " : "") + extra[i];
    if (extra.size() > 5)
      list += ", ... (" + std::to_string(extra.size()) + " in all)";
    fail("tensors not in the " + reader + ": " + list +
         " (a checkpoint of a different model?)");
  }
}

void Checkpoint::readSlice(const std::string &name, const TensorSlice &slice,
                           float *out) const {
  const Entry &e = entries_.at(name);
  const size_t bytes = dtypeBytes(e.dtype);
  const std::string where = "tensor \"" + e.fileName + "\": ";
  std::vector<unsigned char> tmp;
  forEachRun(slice, [&](int64_t local, int64_t ckpt, int64_t count) {
    float *dst = out + local;
    if (ckpt < 0) {
      std::memset(dst, 0, count * sizeof(float));
      return;
    }
    const Shard &shard = *shards_[e.shard];
    const uint64_t offset = shard.dataStart + e.begin + ckpt * bytes;
    if (e.dtype == "F32") {
      shard.file.readExactly(dst, count * 4, offset, where);
    } else {
      tmp.resize(count * bytes);
      shard.file.readExactly(tmp.data(), tmp.size(), offset, where);
      convert(e.dtype, tmp.data(), count, dst);
    }
    // A NaN or infinity would train on silently: refuse it where it is.
    for (int64_t i = 0; i < count; ++i)
      if (!std::isfinite(dst[i]))
        shard.file.fail(where + "element " + std::to_string(ckpt + i) + " is " +
                   (std::isnan(dst[i]) ? "NaN" : "infinite") +
                   ": the checkpoint holds non-finite values");
  });
}

SafetensorsWriter::SafetensorsWriter(
    const std::string &path, const std::vector<Tensor> &tensors,
    const std::map<std::string, std::string> &metadata, Values values)
    : path_(path), tmp_(path + ".tmp"), tensors_(tensors), values_(values) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto &[k, v] : metadata)
      meta[k] = v;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (const Tensor &t : tensors_) {
    const uint64_t bytes = static_cast<uint64_t>(numElements(t.shape)) * 4;
    header[t.name] = {{"dtype", "F32"},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw std::runtime_error("cannot write " + tmp_ + ": " +
                             std::strerror(errno));
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  try {
    writeAll(len, 8);
    writeAll(text.data(), text.size());
  } catch (...) {
    // No destructor runs for a constructor that throws: drop PATH.tmp here.
    ::close(fd_);
    ::unlink(tmp_.c_str());
    throw;
  }
}

void SafetensorsWriter::checkWritable(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw std::runtime_error("cannot write " + path + ": it is a directory");
  // The writer's own first step: create PATH.tmp (then drop it again).
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot write " + tmp + ": " +
                             std::strerror(errno));
  ::close(fd);
  ::unlink(tmp.c_str());
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!committed_)
    ::unlink(tmp_.c_str());
}

void SafetensorsWriter::writeAll(const void *buf, size_t bytes) {
  if (const int err = mfile::writeAll(fd_, buf, bytes))
    throw std::runtime_error("cannot write " + tmp_ + ": " +
                             std::strerror(err));
}

void SafetensorsWriter::write(const float *data, int64_t count) {
  if (next_ >= tensors_.size() || count != numElements(tensors_[next_].shape))
    throw std::logic_error("SafetensorsWriter: tensor data out of order");
  if (values_ == Values::Finite)
    for (int64_t i = 0; i < count; ++i)
      if (!std::isfinite(data[i]))
        throw std::runtime_error(
            "not saving " + path_ + ": tensor \"" + tensors_[next_].name +
            "\" element " + std::to_string(i) + " is " +
            (std::isnan(data[i]) ? "NaN" : "infinite") +
            " (the run diverged; --resume would refuse the checkpoint)");
  ++next_;
  writeAll(data, static_cast<size_t>(count) * sizeof(float));
}

void SafetensorsWriter::commit() {
  if (next_ != tensors_.size())
    throw std::logic_error("SafetensorsWriter: not every tensor written");
  int err = ::fsync(fd_) != 0 ? errno : 0;
  if (::close(fd_) != 0 && err == 0)
    err = errno;
  fd_ = -1;
  if (err != 0)
    throw std::runtime_error("cannot write " + tmp_ + ": " +
                             std::strerror(err));
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw std::runtime_error("cannot rename " + tmp_ + " to " + path_ + ": " +
                             std::strerror(errno));
  committed_ = true;
  mfile::syncDirectoryOf(path_);
}

} // namespace mrun
