// llm.c's token files (dev/data/data_common.py write_datafile), what
// megatron-run trains on: a header of 256 little-endian int32, [0] the
// magic, [1] the version, [2] the token count, the rest 0; then the tokens,
// little-endian. GPT-2's layout (magic 20240520, version 1) stores uint16
// tokens; Llama 3's (magic 20240801, version 7) uint32 ones, for
// vocabularies past 65536 ids. megatron-run's reader is TokenData.h.
#ifndef MEGATRON_TOKENIZER_TOKEN_FILE_FORMAT_H
#define MEGATRON_TOKENIZER_TOKEN_FILE_FORMAT_H

#include <cstdint>
#include <string>
#include <vector>

namespace mtok {

constexpr int kTokenFileHeaderInts = 256;

// One of llm.c's token layouts.
struct TokenFileLayout {
  int32_t magic, version;
  int tokenBytes;
  int64_t maxId;
  const char *name;
};
inline constexpr TokenFileLayout kTokens16 = {20240520, 1, 2, 65535,
                                              "16-bit (llm.c gpt-2)"};
inline constexpr TokenFileLayout kTokens32 = {20240801, 7, 4, INT32_MAX,
                                              "32-bit (llm.c llama-3)"};

// The layout whose magic `magic` is, or nullptr.
const TokenFileLayout *layoutOfMagic(int32_t magic);

// The layout ids of a vocabulary of `vocab` need: 16-bit up to 65536 ids,
// 32-bit beyond.
const TokenFileLayout &layoutForVocabulary(int64_t vocab);

// What a header says, checked against the size of its file.
struct TokenFileHeader {
  const TokenFileLayout *layout;
  int64_t count;
};

// The layout and token count of a file of `fileBytes` bytes whose header
// (its first kTokenFileHeaderInts int32, in host order) is `header`. Throws
// std::runtime_error "bad llm.c header: ..." on an unknown magic, another
// version, or a count the size does not hold exactly. Both readers
// (readTokenFile, megatron-run's TokenFile) check through it.
TokenFileHeader checkedHeader(const int32_t *header, uint64_t fileBytes);

// Writes tokens as an llm.c token file in `layout`, atomically
// (support/FileIO.h). Throws std::runtime_error "tokens PATH: ..." on an id
// outside [0, layout.maxId] (naming its position and value) or more tokens
// than the header's int32 count holds, before anything is written; or on a
// write error.
void writeTokenFile(const std::string &path,
                    const std::vector<int32_t> &tokens,
                    const TokenFileLayout &layout);

// The tokens of an llm.c token file of either layout. Throws "tokens PATH:
// ..." on a file that cannot be read, has no llm.c header, or whose header
// checkedHeader refuses.
std::vector<int32_t> readTokenFile(const std::string &path);

} // namespace mtok

#endif // MEGATRON_TOKENIZER_TOKEN_FILE_FORMAT_H
