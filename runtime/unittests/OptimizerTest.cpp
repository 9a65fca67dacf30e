#include "megatron_rt/optimizer.h"

#include "TestUtil.h"

using namespace mrt_test;

namespace {

struct Hyper {
  const char *name;
  double lr, beta1, beta2, eps, weightDecay;
};

class AdamWTest : public ::testing::TestWithParam<Hyper> {};

// Five steps against torch.optim.AdamW's documented algorithm in double:
// decoupled decay p *= 1 - lr*wd, then the bias-corrected Adam step.
TEST_P(AdamWTest, MatchesTorchAlgorithmOverSeveralSteps) {
  const Hyper hp = GetParam();
  const int64_t n = 1003;
  auto p = randomVector(n, 61);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  std::vector<double> pRef = toDouble(p), mRef(n, 0.0), vRef(n, 0.0);
  for (int64_t step = 1; step <= 5; ++step) {
    auto g = randomVector(n, 62 + step);
    mrt_adamw_f32(p.data(), g.data(), m.data(), v.data(), n, hp.lr, hp.beta1,
                  hp.beta2, hp.eps, hp.weightDecay, step);
    double bc1 = 1.0 - std::pow(hp.beta1, step);
    double bc2 = 1.0 - std::pow(hp.beta2, step);
    for (int64_t i = 0; i < n; ++i) {
      pRef[i] *= 1.0 - hp.lr * hp.weightDecay;
      mRef[i] = hp.beta1 * mRef[i] + (1.0 - hp.beta1) * g[i];
      vRef[i] = hp.beta2 * vRef[i] + (1.0 - hp.beta2) * g[i] * g[i];
      pRef[i] -= hp.lr * (mRef[i] / bc1) / (std::sqrt(vRef[i] / bc2) + hp.eps);
    }
  }
  EXPECT_TRUE(allClose(p, pRef));
  EXPECT_TRUE(allClose(m, mRef));
  EXPECT_TRUE(allClose(v, vRef));
}

// GPT-2 settings, and a large lr*wd that would expose L2-style (coupled)
// decay or decay applied with the wrong factor.
INSTANTIATE_TEST_SUITE_P(
    Settings, AdamWTest,
    ::testing::Values(Hyper{"gpt2", 6e-4, 0.9, 0.95, 1e-8, 0.1},
                      Hyper{"largeDecay", 0.1, 0.8, 0.99, 1e-3, 0.5}),
    [](const auto &info) { return info.param.name; });

TEST(SumSquaresTest, MatchesDoubleSum) {
  auto x = randomVector(100003, 71, -3.0f, 3.0f);
  double expected = 0.0;
  for (float v : x)
    expected += double(v) * v;
  double sums[2] = {-1.0, -1.0};
  mrt_sum_squares_f32(x.data(), x.size(), sums, 1);
  EXPECT_TRUE(relativelyClose(sums[1], expected, 1e-12));
  EXPECT_EQ(sums[0], -1.0);
}

TEST(SumSquaresTest, EmptyTensorWritesZero) {
  double sum = -1.0;
  mrt_sum_squares_f32(nullptr, 0, &sum, 0);
  EXPECT_EQ(sum, 0.0);
}

TEST(SumF64Test, AddsInIndexOrder) {
  // 1 + 2^-53 rounds to 1; 1 + (2^-53 + 2^-53) does not.
  const double tiny = 0x1p-53;
  const double forward[3] = {1.0, tiny, tiny}, backward[3] = {tiny, tiny, 1.0};
  EXPECT_EQ(mrt_sum_f64(forward, 3), 1.0);
  EXPECT_EQ(mrt_sum_f64(backward, 3), 1.0 + 2 * tiny);
}

TEST(ScaleTest, MultipliesEveryElement) {
  auto x = randomVector(1001, 72);
  std::vector<double> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    expected[i] = x[i] * 0.37;
  mrt_scale_f32(x.data(), x.size(), 0.37f);
  EXPECT_TRUE(allClose(x, expected));
}

} // namespace
