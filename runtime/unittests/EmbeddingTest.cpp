#include "megatron_rt/embedding.h"

#include "TestUtil.h"

using namespace mrt_test;

namespace {

// This rank holds vocabulary rows [22, 33) of a 50-entry vocabulary.
constexpr int64_t kVocab = 50, kVocabStart = 22, kLocalVocab = 11, kC = 13,
                  kN = 40;

std::vector<int32_t> randomIds() {
  std::mt19937 gen(41);
  std::uniform_int_distribution<int32_t> dist(0, kVocab - 1);
  std::vector<int32_t> ids(kN);
  for (int32_t &id : ids)
    id = dist(gen);
  // Both range boundaries and a repeated id.
  ids[0] = kVocabStart;
  ids[1] = kVocabStart + kLocalVocab - 1;
  ids[2] = kVocabStart - 1;
  ids[3] = kVocabStart + kLocalVocab;
  ids[4] = ids[5] = kVocabStart + 3;
  return ids;
}

bool isLocal(int32_t id) {
  return id >= kVocabStart && id < kVocabStart + kLocalVocab;
}

TEST(EmbeddingTest, ForwardGathersLocalRowsAndZeroesOthers) {
  auto table = randomVector(kLocalVocab * kC, 42);
  auto ids = randomIds();
  auto out = randomVector(kN * kC, 43); // must be overwritten
  mrt_embedding_fwd_f32(table.data(), ids.data(), kVocabStart, kLocalVocab, kC,
                        kN, out.data());
  std::vector<double> expected(kN * kC, 0.0);
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t c = 0; c < kC && isLocal(ids[i]); ++c)
      expected[i * kC + c] = table[(ids[i] - kVocabStart) * kC + c];
  EXPECT_TRUE(allClose(out, expected));
}

TEST(EmbeddingTest, BackwardAccumulatesLocalRows) {
  auto dout = randomVector(kN * kC, 44);
  auto ids = randomIds();
  auto dtable = randomVector(kLocalVocab * kC, 45);
  std::vector<double> expected = toDouble(dtable);
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t c = 0; c < kC && isLocal(ids[i]); ++c)
      expected[(ids[i] - kVocabStart) * kC + c] += dout[i * kC + c];
  mrt_embedding_bwd_f32(dout.data(), ids.data(), kVocabStart, kLocalVocab, kC,
                        kN, dtable.data());
  EXPECT_TRUE(allClose(dtable, expected));
}

} // namespace
