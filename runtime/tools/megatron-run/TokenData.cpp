#include "TokenData.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace mrun {

TokenFile::TokenFile(const std::string &path) : file_("data", path) {
  auto fail = [&](const std::string &msg) { file_.fail(msg); };
  const uint64_t size = file_.size();
  int32_t magic = 0;
  if (size >= 4)
    file_.readExactly(&magic, 4, 0);
  if (mtok::layoutOfMagic(magic)) {
    llmc_ = true;
    const uint64_t headerBytes = mtok::kTokenFileHeaderInts * 4;
    if (size < headerBytes)
      fail("bad llm.c header: the file has " + std::to_string(size) +
           " bytes, less than the " + std::to_string(headerBytes) +
           "-byte header");
    int32_t header[mtok::kTokenFileHeaderInts];
    file_.readExactly(header, headerBytes, 0);
    try {
      mtok::TokenFileHeader checked = mtok::checkedHeader(header, size);
      layout_ = checked.layout;
      count_ = checked.count;
    } catch (const std::runtime_error &e) {
      fail(e.what());
    }
    dataStart_ = headerBytes;
  } else {
    if (size % 2 != 0)
      fail("no llm.c header (magic " + std::to_string(mtok::kTokens16.magic) +
           " or " + std::to_string(mtok::kTokens32.magic) +
           ") and an odd size (" + std::to_string(size) +
           " bytes): not raw uint16 tokens either");
    count_ = static_cast<int64_t>(size / 2);
    dataStart_ = 0;
  }
}

void TokenFile::read(int64_t first, int64_t n, uint32_t *out) const {
  const int width = layout_->tokenBytes;
  if (width == 4) {
    file_.readExactly(out, static_cast<uint64_t>(n) * 4,
                      dataStart_ + first * 4);
    return;
  }
  std::vector<uint16_t> narrow(n);
  file_.readExactly(narrow.data(), static_cast<uint64_t>(n) * 2,
                    dataStart_ + first * 2);
  std::copy(narrow.begin(), narrow.end(), out);
}

void TokenFile::checkToken(uint32_t id, int64_t position,
                           int64_t validVocab) const {
  if (id >= static_cast<uint64_t>(validVocab))
    file_.fail("token at position " + std::to_string(position) + " has id " +
               std::to_string(id) + ", which is >= the model's valid_vocab " +
               std::to_string(validVocab));
}

void TokenFile::validate(int64_t batch, int64_t seq, int64_t validVocab,
                         int64_t uses) const {
  if (validVocab > layout_->maxId + 1)
    file_.fail(std::string("a ") + layout_->name +
               " token file holds ids up to " +
               std::to_string(layout_->maxId) + ", but the model's vocabulary "
               "has " + std::to_string(validVocab) +
               " ids: write it with 32-bit tokens (llm.c's llama-3 layout, "
               "magic " + std::to_string(mtok::kTokens32.magic) +
               "; megatron-tokenize does so for such a vocabulary)");
  const int64_t window = batch * seq + 1;
  if (count_ < window)
    file_.fail(std::to_string(count_) + " tokens, fewer than the " +
               std::to_string(window) + " one batch needs (batch " +
               std::to_string(batch) + " x seq " + std::to_string(seq) +
               " + 1)");
  const int64_t end = std::min(count_, uses);
  std::vector<uint32_t> buf;
  const int64_t chunk = 1 << 20;
  for (int64_t first = 0; first < end; first += chunk) {
    const int64_t n = std::min(chunk, end - first);
    buf.resize(n);
    read(first, n, buf.data());
    for (int64_t i = 0; i < n; ++i)
      checkToken(buf[i], first + i, validVocab);
  }
}

void TokenFile::batch(int64_t step, int64_t batch, int64_t seq,
                      int64_t validVocab, int32_t *inputs,
                      int32_t *targets) const {
  const int64_t bt = batch * seq, window = bt + 1;
  if (count_ < window)
    file_.fail("too few tokens for a batch");
  std::vector<uint32_t> buf(window);
  // First index (step*B*T) mod count without overflowing for large steps.
  int64_t pos = static_cast<int64_t>(
      (static_cast<unsigned __int128>(step) * bt) % count_);
  const int64_t start = pos;
  for (int64_t got = 0; got < window;) {
    const int64_t n = std::min(window - got, count_ - pos);
    read(pos, n, buf.data() + got);
    got += n;
    pos = (pos + n) % count_;
  }
  for (int64_t j = 0; j < window; ++j)
    checkToken(buf[j], (start + j) % count_, validVocab);
  for (int64_t j = 0; j < bt; ++j) {
    inputs[j] = static_cast<int32_t>(buf[j]);
    targets[j] = static_cast<int32_t>(buf[j + 1]);
  }
}

int64_t tokensUsed(int64_t steps, int64_t batch, int64_t seq) {
  const int64_t bt = batch * seq;
  return steps > (INT64_MAX - 1) / bt ? INT64_MAX : steps * bt + 1;
}

} // namespace mrun
