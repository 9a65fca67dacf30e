#include "megatron_rt/dropout.h"

#include "TestUtil.h"

#include <array>

using namespace mrt_test;

namespace {

std::array<uint32_t, 4> philox(std::array<uint32_t, 4> counter,
                               std::array<uint32_t, 2> key) {
  mrt_philox4x32_10(counter.data(), key.data());
  return counter;
}

// The known-answer vectors of Random123's kat_vectors for philox4x32_10.
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c,
                                     0x9b00dbd8}));
  EXPECT_EQ(philox({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6,
                                     0x6d5451fd}));
  EXPECT_EQ(philox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                   {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420,
                                     0x24126ea1}));
}

constexpr int64_t kSeed = 1234, kStep = 7, kStream = 3;

// A global [4, 6, 10] tensor dropped whole.
struct Global {
  static constexpr int64_t n0 = 4, n1 = 6, n2 = 10;
  std::vector<float> x = randomVector(n0 * n1 * n2, 5, 0.5f, 1.5f);
  std::vector<float> y = std::vector<float>(x.size());
  explicit Global(float rate) {
    mrt_dropout_f32(x.data(), y.data(), n0, n1, n2, 0, 0, 0, n1, n2, rate,
                    kSeed, kStep, kStream);
  }
  float at(int64_t i, int64_t j, int64_t k) const {
    return y[(i * n1 + j) * n2 + k];
  }
};

// Every element is either dropped or scaled by 1 / (1 - rate), and about
// rate of them are dropped.
TEST(Dropout, KeepsOrScalesEachElement) {
  const float rate = 0.3f;
  Global g(rate);
  int64_t dropped = 0;
  for (size_t i = 0; i < g.x.size(); ++i) {
    if (g.y[i] == 0.0f)
      ++dropped;
    else
      EXPECT_FLOAT_EQ(g.y[i], g.x[i] / (1.0f - rate));
  }
  // 240 draws at p = 0.3: mean 72, standard deviation 7.1.
  EXPECT_GT(dropped, 72 - 30);
  EXPECT_LT(dropped, 72 + 30);
}

// A rank holding a block of the global tensor at offsets draws its
// elements' global bits: the blocks put together are the whole.
TEST(Dropout, BlocksAtOffsetsEqualTheWhole) {
  Global g(0.5f);
  const int64_t b0 = 2, b1 = 3, b2 = 5; // a [2, 3, 5] block per rank
  for (int64_t o0 = 0; o0 < Global::n0; o0 += b0)
    for (int64_t o1 = 0; o1 < Global::n1; o1 += b1)
      for (int64_t o2 = 0; o2 < Global::n2; o2 += b2) {
        std::vector<float> x(b0 * b1 * b2), y(x.size());
        for (int64_t i = 0; i < b0; ++i)
          for (int64_t j = 0; j < b1; ++j)
            for (int64_t k = 0; k < b2; ++k)
              x[(i * b1 + j) * b2 + k] =
                  g.x[((o0 + i) * Global::n1 + o1 + j) * Global::n2 + o2 + k];
        mrt_dropout_f32(x.data(), y.data(), b0, b1, b2, o0, o1, o2,
                        Global::n1, Global::n2, 0.5f, kSeed, kStep, kStream);
        for (int64_t i = 0; i < b0; ++i)
          for (int64_t j = 0; j < b1; ++j)
            for (int64_t k = 0; k < b2; ++k)
              ASSERT_EQ(y[(i * b1 + j) * b2 + k],
                        g.at(o0 + i, o1 + j, o2 + k))
                  << "block at (" << o0 << ", " << o1 << ", " << o2 << ")";
      }
}

// Another step, stream or seed draws another mask.
TEST(Dropout, KeyChangesTheMask) {
  Global g(0.5f);
  auto differs = [&](int64_t seed, int64_t step, int64_t stream) {
    std::vector<float> y(g.x.size());
    mrt_dropout_f32(g.x.data(), y.data(), Global::n0, Global::n1, Global::n2,
                    0, 0, 0, Global::n1, Global::n2, 0.5f, seed, step, stream);
    return y != g.y;
  };
  EXPECT_TRUE(differs(kSeed + 1, kStep, kStream));
  EXPECT_TRUE(differs(kSeed, kStep + 1, kStream));
  EXPECT_TRUE(differs(kSeed, kStep, kStream + 1));
  EXPECT_FALSE(differs(kSeed, kStep, kStream));
}

TEST(Dropout, RateZeroIsTheIdentity) {
  Global g(0.0f);
  EXPECT_EQ(g.y, g.x);
}

// The bf16 entry keeps the same elements and rounds the scaled value once.
TEST(Dropout, Bf16KeepsTheSameElements) {
  Global g(0.25f);
  std::vector<mrt_bf16> x(g.x.size()), y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = mrt_bf16_round(g.x[i]);
  mrt_dropout_bf16(x.data(), y.data(), Global::n0, Global::n1, Global::n2, 0,
                   0, 0, Global::n1, Global::n2, 0.25f, kSeed, kStep, kStream);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(y[i] == 0, g.y[i] == 0.0f) << "element " << i;
}

TEST(DropoutDeathTest, RateOutsideRangeIsFatal) {
  std::vector<float> x(4);
  EXPECT_DEATH(mrt_dropout_f32(x.data(), x.data(), 1, 1, 4, 0, 0, 0, 1, 4,
                               -0.5f, 0, 0, 0),
               "dropout: rate -0.5 is outside \\[0, 1\\)");
}

} // namespace
