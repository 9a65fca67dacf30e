// Whole-file reads and atomic writes, with errors that name the file: what
// the runtime's tools share (the tokenizers' files, token files, megatron-
// run's checkpoints).
#ifndef MEGATRON_SUPPORT_FILE_IO_H
#define MEGATRON_SUPPORT_FILE_IO_H

#include <cstddef>
#include <string>

namespace mfile {

// The bytes of a regular file. Throws std::runtime_error "<kind> <path>:
// cannot open: ...", "not a regular file" or "read failed: ..." (kind:
// "vocab", "merges", "input", ...).
std::string readFileBytes(const std::string &kind, const std::string &path);

// Writes bytes to path through path + ".tmp" and a rename, so that path is
// either absent, its old content or the whole new one, also after a crash
// (the data and the directory are synced). Throws "cannot write PATH.tmp:
// ..." or "cannot rename ..."; PATH.tmp is removed on failure.
void writeFileAtomically(const std::string &path, const std::string &bytes);

// Writes all `size` bytes of `data` to `fd`, retrying short writes and
// EINTR; 0 or the errno of the failure.
int writeAll(int fd, const void *data, size_t size);

// Makes a rename into `path`'s directory survive a crash: syncs the
// directory. Throws "cannot sync the directory of PATH: ...".
void syncDirectoryOf(const std::string &path);

} // namespace mfile

#endif // MEGATRON_SUPPORT_FILE_IO_H
