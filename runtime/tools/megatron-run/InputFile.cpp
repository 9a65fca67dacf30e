#include "InputFile.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mrun {

InputFile::InputFile(std::string kind, std::string path)
    : kind_(std::move(kind)), path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0)
    fail(std::string("cannot open: ") + std::strerror(errno));
  // The destructor does not run when the constructor throws.
  auto failClosing = [&](const std::string &msg) {
    ::close(fd_);
    fd_ = -1;
    fail(msg);
  };
  struct stat st;
  if (fstat(fd_, &st) != 0)
    failClosing(std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    failClosing("not a regular file");
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

void InputFile::fail(const std::string &msg) const {
  throw std::runtime_error(kind_ + " " + path_ + ": " + msg);
}

void InputFile::readExactly(void *buf, uint64_t bytes, uint64_t offset,
                            const std::string &context) const {
  auto *p = static_cast<char *>(buf);
  while (bytes > 0) {
    ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      fail(context + (n < 0 ? std::string("read failed: ") +
                                  std::strerror(errno)
                            : std::string("unexpected end of file")));
    p += n;
    bytes -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

} // namespace mrun
