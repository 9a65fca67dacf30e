#include "TokenFileFormat.h"

#include "FileIO.h"

#include <climits>
#include <stdexcept>

namespace mtok {

namespace {

constexpr size_t kHeaderBytes = kTokenFileHeaderInts * 4;

// Little-endian, whatever the host.
void putLittleEndian(uint32_t value, int bytes, std::string &out) {
  for (int i = 0; i < bytes; ++i)
    out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

uint32_t getLittleEndian(const std::string &in, size_t offset, int bytes) {
  uint32_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= uint32_t{static_cast<unsigned char>(in[offset + i])} << (8 * i);
  return value;
}

[[noreturn]] void fail(const std::string &path, const std::string &what) {
  throw std::runtime_error("tokens " + path + ": " + what);
}

void checkWritable(const std::string &path, const std::vector<int32_t> &tokens,
                   const TokenFileLayout &layout) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    fail(path, std::to_string(tokens.size()) +
                   " tokens, more than the header's int32 count holds");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] > layout.maxId)
      fail(path, "token at position " + std::to_string(i) + " has id " +
                     std::to_string(tokens[i]) + ", which does not fit the " +
                     layout.name + " file's tokens (0.." +
                     std::to_string(layout.maxId) + ")");
}

} // namespace

const TokenFileLayout *layoutOfMagic(int32_t magic) {
  for (const TokenFileLayout *layout : {&kTokens16, &kTokens32})
    if (layout->magic == magic)
      return layout;
  return nullptr;
}

const TokenFileLayout &layoutForVocabulary(int64_t vocab) {
  return vocab <= kTokens16.maxId + 1 ? kTokens16 : kTokens32;
}

TokenFileHeader checkedHeader(const int32_t *header, uint64_t fileBytes) {
  auto fail = [](const std::string &what) {
    throw std::runtime_error("bad llm.c header: " + what);
  };
  const TokenFileLayout *layout = layoutOfMagic(header[0]);
  if (!layout)
    fail("unknown magic " + std::to_string(header[0]) + " (expected " +
         std::to_string(kTokens16.magic) + " or " +
         std::to_string(kTokens32.magic) + ")");
  if (header[1] != layout->version)
    fail("unsupported version " + std::to_string(header[1]) + " of the " +
         layout->name + " layout (expected " +
         std::to_string(layout->version) + ")");
  const int64_t count = header[2];
  const uint64_t tokenBytes = fileBytes - kHeaderBytes;
  const uint64_t width = static_cast<uint64_t>(layout->tokenBytes);
  if (count < 0 || tokenBytes % width != 0 ||
      static_cast<uint64_t>(count) != tokenBytes / width)
    fail("it says " + std::to_string(count) + " tokens but the file holds " +
         std::to_string(tokenBytes) + " bytes of " + layout->name +
         " tokens (" + std::to_string(tokenBytes / width) + " tokens)");
  return {layout, count};
}

void writeTokenFile(const std::string &path,
                    const std::vector<int32_t> &tokens,
                    const TokenFileLayout &layout) {
  checkWritable(path, tokens, layout);
  std::string bytes;
  bytes.reserve(kHeaderBytes + layout.tokenBytes * tokens.size());
  putLittleEndian(static_cast<uint32_t>(layout.magic), 4, bytes);
  putLittleEndian(static_cast<uint32_t>(layout.version), 4, bytes);
  putLittleEndian(static_cast<uint32_t>(tokens.size()), 4, bytes);
  bytes.resize(kHeaderBytes, '\0');
  for (int32_t id : tokens)
    putLittleEndian(static_cast<uint32_t>(id), layout.tokenBytes, bytes);
  mfile::writeFileAtomically(path, bytes);
}

std::vector<int32_t> readTokenFile(const std::string &path) {
  const std::string bytes = mfile::readFileBytes("tokens", path);
  if (bytes.size() < kHeaderBytes ||
      !layoutOfMagic(static_cast<int32_t>(getLittleEndian(bytes, 0, 4))))
    fail(path, "not an llm.c token file (no " + std::to_string(kHeaderBytes) +
                   "-byte header with magic " +
                   std::to_string(kTokens16.magic) + " or " +
                   std::to_string(kTokens32.magic) + ")");
  int32_t header[kTokenFileHeaderInts];
  for (int i = 0; i < kTokenFileHeaderInts; ++i)
    header[i] = static_cast<int32_t>(getLittleEndian(bytes, 4 * i, 4));
  TokenFileHeader checked{};
  try {
    checked = checkedHeader(header, bytes.size());
  } catch (const std::runtime_error &e) {
    fail(path, e.what());
  }
  const int width = checked.layout->tokenBytes;
  std::vector<int32_t> tokens(static_cast<size_t>(checked.count));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>(
        getLittleEndian(bytes, kHeaderBytes + width * i, width));
  return tokens;
}

} // namespace mtok
