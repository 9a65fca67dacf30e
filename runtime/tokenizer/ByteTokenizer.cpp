#include "Tokenizer.h"

namespace mtok {

std::vector<int32_t> ByteTokenizer::encode(const std::string &text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (unsigned char b : text)
    ids.push_back(b);
  return ids;
}

std::string ByteTokenizer::tokenBytes(int32_t id) const {
  return std::string(1, static_cast<char>(id));
}

} // namespace mtok
