// Whole-file reads and atomic writes, with errors that name the file.
#ifndef MEGATRON_TOKENIZER_FILE_IO_H
#define MEGATRON_TOKENIZER_FILE_IO_H

#include <string>

namespace mtok {

// The bytes of a regular file. Throws std::runtime_error "<kind> <path>:
// cannot open: ...", "not a regular file" or "read failed: ..." (kind:
// "vocab", "merges", "input", ...).
std::string readFileBytes(const std::string &kind, const std::string &path);

// Writes bytes to path through path + ".tmp" and a rename, so that path is
// either absent, its old content or the whole new one, also after a crash
// (the data and the directory are synced). Throws "cannot write PATH.tmp:
// ..." or "cannot rename ..."; PATH.tmp is removed on failure.
void writeFileAtomically(const std::string &path, const std::string &bytes);

} // namespace mtok

#endif // MEGATRON_TOKENIZER_FILE_IO_H
