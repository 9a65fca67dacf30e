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

void checkWritable(const std::string &path,
                   const std::vector<int32_t> &tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    fail(path, std::to_string(tokens.size()) +
                   " tokens, more than the header's int32 count holds");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] > kTokenFileMaxId)
      fail(path, "token at position " + std::to_string(i) + " has id " +
                     std::to_string(tokens[i]) +
                     ", which does not fit the file's uint16 tokens (0.." +
                     std::to_string(kTokenFileMaxId) + ")");
}

} // namespace

int64_t checkedTokenCount(const int32_t *header, uint64_t fileBytes) {
  auto fail = [](const std::string &what) {
    throw std::runtime_error("bad llm.c header: " + what);
  };
  if (header[1] != kTokenFileVersion)
    fail("unsupported version " + std::to_string(header[1]) + " (expected " +
         std::to_string(kTokenFileVersion) + ")");
  const int64_t count = header[2];
  const uint64_t tokenBytes = fileBytes - kHeaderBytes;
  if (count < 0 || tokenBytes % 2 != 0 ||
      static_cast<uint64_t>(count) != tokenBytes / 2)
    fail("it says " + std::to_string(count) + " tokens but the file holds " +
         std::to_string(tokenBytes) + " bytes of tokens (" +
         std::to_string(tokenBytes / 2) + " tokens)");
  return count;
}

void writeTokenFile(const std::string &path,
                    const std::vector<int32_t> &tokens) {
  checkWritable(path, tokens);
  std::string bytes;
  bytes.reserve(kHeaderBytes + 2 * tokens.size());
  putLittleEndian(kTokenFileMagic, 4, bytes);
  putLittleEndian(kTokenFileVersion, 4, bytes);
  putLittleEndian(static_cast<uint32_t>(tokens.size()), 4, bytes);
  bytes.resize(kHeaderBytes, '\0');
  for (int32_t id : tokens)
    putLittleEndian(static_cast<uint32_t>(id), 2, bytes);
  mfile::writeFileAtomically(path, bytes);
}

std::vector<int32_t> readTokenFile(const std::string &path) {
  const std::string bytes = mfile::readFileBytes("tokens", path);
  if (bytes.size() < kHeaderBytes ||
      static_cast<int32_t>(getLittleEndian(bytes, 0, 4)) != kTokenFileMagic)
    fail(path, "not an llm.c token file (no " + std::to_string(kHeaderBytes) +
                   "-byte header with magic " +
                   std::to_string(kTokenFileMagic) + ")");
  int32_t header[kTokenFileHeaderInts];
  for (int i = 0; i < kTokenFileHeaderInts; ++i)
    header[i] = static_cast<int32_t>(getLittleEndian(bytes, 4 * i, 4));
  int64_t count = 0;
  try {
    count = checkedTokenCount(header, bytes.size());
  } catch (const std::runtime_error &e) {
    fail(path, e.what());
  }
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] =
        static_cast<int32_t>(getLittleEndian(bytes, kHeaderBytes + 2 * i, 2));
  return tokens;
}

} // namespace mtok
