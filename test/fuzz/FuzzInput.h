//===- FuzzInput.h - The fuzzer's bytes as what a reader takes -----------===//
//
// The runtime's readers open paths (InputFile); the fuzzer hands out bytes.
// A memory file holds them, opened again through /proc/self/fd as any file
// named on the command line would be.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_TEST_FUZZ_FUZZINPUT_H
#define MEGATRON_TEST_FUZZ_FUZZINPUT_H

#include <cstdint>
#include <cstdlib>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

namespace fuzz {

class BytesFile {
public:
  BytesFile(const uint8_t *data, size_t size)
      : fd_(memfd_create("fuzz-input", MFD_CLOEXEC)) {
    if (fd_ < 0)
      std::abort(); // the harness, not the input, failed
    for (size_t done = 0; done < size;) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0)
        std::abort();
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~BytesFile() { close(fd_); }
  BytesFile(const BytesFile &) = delete;
  BytesFile &operator=(const BytesFile &) = delete;

  const std::string &path() const { return path_; }

private:
  int fd_;
  std::string path_;
};

} // namespace fuzz

#endif // MEGATRON_TEST_FUZZ_FUZZINPUT_H
