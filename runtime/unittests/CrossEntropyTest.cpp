#include "megatron_rt/cross_entropy.h"

#include "TestUtil.h"

#include <algorithm>
#include <string>

using namespace mrt_test;

namespace {

constexpr int64_t kN = 19, kPaddedVocab = 104;

struct Problem {
  int64_t validVocab;
  std::vector<float> logits; // [kN, kPaddedVocab]
  std::vector<int32_t> targets;
};

Problem makeProblem(int64_t validVocab) {
  Problem p{validVocab, randomVector(kN * kPaddedVocab, 51, -5.0f, 5.0f),
            std::vector<int32_t>(kN)};
  // Huge padding logits would dominate the softmax if they leaked into it.
  for (int64_t i = 0; i < kN; ++i)
    std::fill(p.logits.begin() + i * kPaddedVocab + validVocab,
              p.logits.begin() + (i + 1) * kPaddedVocab, 1000.0f);
  std::mt19937 gen(52);
  std::uniform_int_distribution<int32_t> dist(0, validVocab - 1);
  for (int32_t &t : p.targets)
    t = dist(gen);
  p.targets[0] = validVocab - 1;
  return p;
}

struct Reference {
  double loss;
  std::vector<double> dlogits;
};

Reference referenceFullVocab(const Problem &p, double dloss) {
  Reference ref{0.0, std::vector<double>(kN * kPaddedVocab, 0.0)};
  for (int64_t i = 0; i < kN; ++i) {
    const float *row = p.logits.data() + i * kPaddedVocab;
    double maxLogit = *std::max_element(row, row + p.validVocab), sum = 0.0;
    for (int64_t j = 0; j < p.validVocab; ++j)
      sum += std::exp(row[j] - maxLogit);
    ref.loss += (std::log(sum) + maxLogit - row[p.targets[i]]) / kN;
    for (int64_t j = 0; j < p.validVocab; ++j)
      ref.dlogits[i * kPaddedVocab + j] =
          (std::exp(row[j] - maxLogit) / sum - (j == p.targets[i])) * dloss /
          kN;
  }
  return ref;
}

// The logits columns [start, start + Vl) of every row, as one rank holds them.
std::vector<float> rankSlice(const Problem &p, int64_t start, int64_t Vl) {
  std::vector<float> slice(kN * Vl);
  for (int64_t i = 0; i < kN; ++i)
    std::copy_n(p.logits.begin() + i * kPaddedVocab + start, Vl,
                slice.begin() + i * Vl);
  return slice;
}

struct Case {
  int64_t ranks, validVocab;
};

class VocabParallelCrossEntropyTest : public ::testing::TestWithParam<Case> {};

// Runs Megatron's protocol over simulated ranks, with the all-reduces done
// here, and compares loss and gradients with the full-vocabulary reference.
TEST_P(VocabParallelCrossEntropyTest, MatchesFullVocabularyReference) {
  const auto [ranks, validVocab] = GetParam();
  const int64_t Vl = kPaddedVocab / ranks;
  const float dloss = 1.7f;
  Problem p = makeProblem(validVocab);
  std::vector<std::vector<float>> slices;
  for (int64_t r = 0; r < ranks; ++r)
    slices.push_back(rankSlice(p, r * Vl, Vl));

  std::vector<float> gmax(kN, -INFINITY), localMax(kN);
  for (int64_t r = 0; r < ranks; ++r) {
    mrt_vocab_ce_local_max_f32(slices[r].data(), kN, Vl, r * Vl, validVocab,
                               localMax.data());
    for (int64_t i = 0; i < kN; ++i)
      gmax[i] = std::max(gmax[i], localMax[i]);
  }
  std::vector<float> sumexp(kN, 0.0f), tlogit(kN, 0.0f);
  std::vector<float> localSum(kN), localTarget(kN);
  for (int64_t r = 0; r < ranks; ++r) {
    mrt_vocab_ce_local_sumexp_f32(slices[r].data(), p.targets.data(), kN, Vl,
                                  r * Vl, validVocab, gmax.data(),
                                  localSum.data(), localTarget.data());
    for (int64_t i = 0; i < kN; ++i) {
      sumexp[i] += localSum[i];
      tlogit[i] += localTarget[i];
    }
  }
  float loss =
      mrt_vocab_ce_loss_f32(gmax.data(), sumexp.data(), tlogit.data(), kN);

  std::vector<float> dlogits(kN * kPaddedVocab);
  for (int64_t r = 0; r < ranks; ++r) {
    std::vector<float> dslice(kN * Vl, 999.0f); // must be overwritten
    mrt_vocab_ce_bwd_f32(slices[r].data(), p.targets.data(), gmax.data(),
                         sumexp.data(), kN, Vl, r * Vl, validVocab, dloss,
                         dslice.data());
    for (int64_t i = 0; i < kN; ++i)
      std::copy_n(dslice.begin() + i * Vl, Vl,
                  dlogits.begin() + i * kPaddedVocab + r * Vl);
  }

  Reference ref = referenceFullVocab(p, dloss);
  EXPECT_TRUE(relativelyClose(loss, ref.loss));
  EXPECT_TRUE(allClose(dlogits, ref.dlogits));
}

// 104 columns over 1, 2 and 4 ranks; with 70 valid entries the fourth of four
// ranks (columns 78..103) holds padding only.
INSTANTIATE_TEST_SUITE_P(Splits, VocabParallelCrossEntropyTest,
                         ::testing::Values(Case{1, 104}, Case{2, 104},
                                           Case{4, 104}, Case{1, 97},
                                           Case{2, 97}, Case{4, 97},
                                           Case{1, 70}, Case{2, 70},
                                           Case{4, 70}),
                         [](const auto &info) {
                           return "ranks" + std::to_string(info.param.ranks) +
                                  "_valid" +
                                  std::to_string(info.param.validVocab);
                         });

TEST(VocabParallelCrossEntropyLocalMaxTest, PaddingOnlyRankGivesMinusInfinity) {
  Problem p = makeProblem(70);
  std::vector<float> slice = rankSlice(p, 78, 26), localMax(kN);
  mrt_vocab_ce_local_max_f32(slice.data(), kN, 26, 78, 70, localMax.data());
  for (float m : localMax)
    EXPECT_EQ(m, -INFINITY);
}

} // namespace
