#include "FileIO.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mfile {

namespace {

// Closes a descriptor on every path out of a scope.
class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  int get() const { return fd_; }
  // Closes now, so that the caller sees close()'s error (0 or an errno).
  int close() {
    const int err = ::close(fd_) != 0 ? errno : 0;
    fd_ = -1;
    return err;
  }

private:
  int fd_;
};

std::string errorText(int err) { return std::strerror(err); }

std::string directoryOf(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "."
         : slash == 0               ? "/"
                                    : path.substr(0, slash);
}

} // namespace

int writeAll(int fd, const void *data, size_t size) {
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

void syncDirectoryOf(const std::string &path) {
  Fd dir(::open(directoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0 || ::fsync(dir.get()) != 0)
    throw std::runtime_error("cannot sync the directory of " + path + ": " +
                             errorText(errno));
}

std::string readFileBytes(const std::string &kind, const std::string &path) {
  const auto fail = [&](const std::string &what) {
    throw std::runtime_error(kind + " " + path + ": " + what);
  };
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0)
    fail("cannot open: " + errorText(errno));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    fail("cannot stat: " + errorText(errno));
  if (!S_ISREG(st.st_mode))
    fail("not a regular file");
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd.get(), &bytes[got], bytes.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      fail("read failed: " + errorText(errno));
    if (n == 0)
      fail("the file shrank while it was read");
    got += static_cast<size_t>(n);
  }
  return bytes;
}

void writeFileAtomically(const std::string &path, const std::string &bytes) {
  const std::string tmp = path + ".tmp";
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0)
    throw std::runtime_error("cannot write " + tmp + ": " + errorText(errno));
  int err = writeAll(fd.get(), bytes.data(), bytes.size());
  if (err == 0 && ::fsync(fd.get()) != 0)
    err = errno;
  const int closeErr = fd.close();
  if (err == 0)
    err = closeErr;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + tmp + ": " + errorText(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " +
                             errorText(err));
  }
  syncDirectoryOf(path);
}

} // namespace mfile
