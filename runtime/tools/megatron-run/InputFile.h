// A regular file opened read-only, read at explicit offsets: the common
// ground of the checkpoint and token-data readers.
#ifndef MEGATRON_RUN_INPUT_FILE_H
#define MEGATRON_RUN_INPUT_FILE_H

#include <cstdint>
#include <string>

namespace mrun {

// Every error is a std::runtime_error that reads "<kind> <path>: <what>"
// (kind: "checkpoint", "data", ...).
class InputFile {
public:
  // Opens `path` (O_RDONLY | O_CLOEXEC) and checks that it is a regular
  // file; throws "cannot open: ...", "cannot stat: ..." or "not a regular
  // file".
  InputFile(std::string kind, std::string path);
  ~InputFile();
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;

  const std::string &path() const { return path_; }
  uint64_t size() const { return size_; }

  // Reads exactly `bytes` bytes at `offset` into buf; throws "read failed:
  // ..." or "unexpected end of file", after `context` when it is not empty
  // (e.g. "tensor \"wte.weight\": ").
  void readExactly(void *buf, uint64_t bytes, uint64_t offset,
                   const std::string &context = "") const;

  // Throws "<kind> <path>: <msg>".
  [[noreturn]] void fail(const std::string &msg) const;

private:
  std::string kind_, path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

} // namespace mrun

#endif // MEGATRON_RUN_INPUT_FILE_H
