// llm.c's token file (dev/data/data_common.py write_datafile), what
// megatron-run trains on: a header of 256 little-endian int32, [0] the
// magic 20240520, [1] the version 1, [2] the token count, the rest 0; then
// the tokens as little-endian uint16. megatron-run's reader is TokenData.h.
#ifndef MEGATRON_TOKENIZER_TOKEN_FILE_FORMAT_H
#define MEGATRON_TOKENIZER_TOKEN_FILE_FORMAT_H

#include <cstdint>
#include <string>
#include <vector>

namespace mtok {

constexpr int32_t kTokenFileMagic = 20240520;
constexpr int32_t kTokenFileVersion = 1;
constexpr int kTokenFileHeaderInts = 256;
constexpr int32_t kTokenFileMaxId = 65535; // uint16 tokens

// The token count of an llm.c file of `fileBytes` bytes whose header (its
// first kTokenFileHeaderInts int32, in host order) is `header`. Throws
// std::runtime_error "bad llm.c header: ..." on another version or a count
// the size does not hold exactly. Both readers (readTokenFile, megatron-run's
// TokenFile) check through it.
int64_t checkedTokenCount(const int32_t *header, uint64_t fileBytes);

// Writes tokens as an llm.c token file, atomically (support/FileIO.h). Throws
// std::runtime_error "tokens PATH: ..." on an id outside [0, 65535] (naming
// its position and value) or more tokens than the header's int32 count
// holds, before anything is written; or on a write error.
void writeTokenFile(const std::string &path,
                    const std::vector<int32_t> &tokens);

// The tokens of an llm.c token file. Throws "tokens PATH: ..." on a file
// that cannot be read, has no llm.c header, or whose header
// checkedTokenCount refuses.
std::vector<int32_t> readTokenFile(const std::string &path);

} // namespace mtok

#endif // MEGATRON_TOKENIZER_TOKEN_FILE_FORMAT_H
