#include "megatron_rt/layernorm.h"

#include "TestUtil.h"

using namespace mrt_test;

namespace {

constexpr int64_t kRows = 13, kCols = 77;
constexpr float kEps = 1e-5f;

// Hugging Face's LlamaRMSNorm in double: x / sqrt(mean(x^2) + eps) * w.
struct Reference {
  std::vector<double> y, rstd;
};

Reference referenceForward(const std::vector<double> &x,
                           const std::vector<double> &w) {
  Reference ref{std::vector<double>(x.size()), std::vector<double>(kRows)};
  for (int64_t r = 0; r < kRows; ++r) {
    double sq = 0.0;
    for (int64_t c = 0; c < kCols; ++c)
      sq += x[r * kCols + c] * x[r * kCols + c];
    ref.rstd[r] = 1.0 / std::sqrt(sq / kCols + kEps);
    for (int64_t c = 0; c < kCols; ++c)
      ref.y[r * kCols + c] = x[r * kCols + c] * ref.rstd[r] * w[c];
  }
  return ref;
}

class RMSNormTest : public ::testing::Test {
protected:
  // An offset mean: RMS norm does not subtract it, unlike layer norm.
  std::vector<float> x = randomVector(kRows * kCols, 21, 0.5f, 3.0f);
  std::vector<float> w = randomVector(kCols, 22, 0.5f, 1.5f);
  std::vector<float> dy = randomVector(kRows * kCols, 23);

  /// The forward's rstd and the backward's dx and dw; dw starts from
  /// garbage, which the kernel overwrites.
  struct Gradients {
    std::vector<float> rstd, dx, dw;
  };
  Gradients forwardBackward() {
    Gradients g{std::vector<float>(kRows), std::vector<float>(x.size()),
                std::vector<float>(kCols, 123.0f)};
    std::vector<float> y(x.size());
    mrt_rmsnorm_fwd_f32(x.data(), w.data(), y.data(), g.rstd.data(), kRows,
                        kCols, kEps);
    mrt_rmsnorm_bwd_f32(dy.data(), x.data(), w.data(), g.rstd.data(),
                        g.dx.data(), g.dw.data(), kRows, kCols);
    return g;
  }
};

TEST_F(RMSNormTest, ForwardMatchesNaive) {
  std::vector<float> y(x.size()), rstd(kRows);
  mrt_rmsnorm_fwd_f32(x.data(), w.data(), y.data(), rstd.data(), kRows, kCols,
                      kEps);
  Reference ref = referenceForward(toDouble(x), toDouble(w));
  EXPECT_TRUE(allClose(y, ref.y));
  EXPECT_TRUE(allClose(rstd, ref.rstd));
}

TEST_F(RMSNormTest, ForwardInPlace) {
  std::vector<float> y = x, rstd(kRows);
  mrt_rmsnorm_fwd_f32(y.data(), w.data(), y.data(), rstd.data(), kRows, kCols,
                      kEps);
  EXPECT_TRUE(allClose(y, referenceForward(toDouble(x), toDouble(w)).y));
}

TEST_F(RMSNormTest, ResidualForwardWritesTheSumAndItsNorm) {
  std::vector<float> residual = randomVector(kRows * kCols, 24, 1.0f, 3.0f);
  std::vector<float> delta = randomVector(kRows * kCols, 25);
  std::vector<double> want(x.size());
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = static_cast<double>(residual[i]) + delta[i];
  std::vector<float> sum(x.size()), y(x.size()), rstd(kRows);
  mrt_residual_rmsnorm_fwd_f32(residual.data(), delta.data(), sum.data(),
                               w.data(), y.data(), rstd.data(), kRows, kCols,
                               kEps);
  EXPECT_TRUE(allClose(sum, want));
  Reference ref = referenceForward(want, toDouble(w));
  EXPECT_TRUE(allClose(y, ref.y));
  EXPECT_TRUE(allClose(rstd, ref.rstd));
}

TEST_F(RMSNormTest, StatsAloneMatchNaive) {
  std::vector<float> rstd(kRows);
  mrt_rmsnorm_stats_f32(x.data(), rstd.data(), kRows, kCols, kEps);
  EXPECT_TRUE(allClose(rstd, referenceForward(toDouble(x), toDouble(w)).rstd));
}

// dx = rstd (g - xhat mean(g xhat)) with g = dy w, dw = sum over rows of
// dy xhat.
TEST_F(RMSNormTest, BackwardMatchesNaiveAndOverwritesWeightGrad) {
  auto [rstd, dx, dw] = forwardBackward();
  Reference ref = referenceForward(toDouble(x), toDouble(w));
  std::vector<double> dxRef(x.size()), dwRef(kCols, 0.0);
  for (int64_t r = 0; r < kRows; ++r) {
    double meanGXhat = 0.0;
    for (int64_t c = 0; c < kCols; ++c) {
      double xhat = x[r * kCols + c] * ref.rstd[r];
      double g = double(dy[r * kCols + c]) * w[c];
      meanGXhat += g * xhat / kCols;
      dwRef[c] += dy[r * kCols + c] * xhat;
    }
    for (int64_t c = 0; c < kCols; ++c) {
      double xhat = x[r * kCols + c] * ref.rstd[r];
      double g = double(dy[r * kCols + c]) * w[c];
      dxRef[r * kCols + c] = ref.rstd[r] * (g - xhat * meanGXhat);
    }
  }
  EXPECT_TRUE(allClose(dx, dxRef));
  EXPECT_TRUE(allClose(dw, dwRef));
}

// dx and dw against finite differences of the naive forward, independently
// of the formula above.
TEST_F(RMSNormTest, BackwardAgreesWithFiniteDifferences) {
  auto [rstd, dx, dw] = forwardBackward();
  auto loss = [&](const std::vector<double> &xs, const std::vector<double> &ws) {
    std::vector<double> ys = referenceForward(xs, ws).y;
    double sum = 0.0;
    for (size_t i = 0; i < ys.size(); ++i)
      sum += dy[i] * ys[i];
    return sum;
  };
  std::vector<double> u = toDouble(randomVector(x.size(), 26));
  EXPECT_TRUE(relativelyClose(
      dotProduct(dx, u),
      directionalDerivative(
          [&](const std::vector<double> &xs) { return loss(xs, toDouble(w)); },
          toDouble(x), u),
      1e-4));
  std::vector<double> v = toDouble(randomVector(kCols, 27));
  EXPECT_TRUE(relativelyClose(
      dotProduct(dw, v),
      directionalDerivative(
          [&](const std::vector<double> &ws) { return loss(toDouble(x), ws); },
          toDouble(w), v),
      1e-4));
}

TEST_F(RMSNormTest, BackwardInPlaceOverDy) {
  auto [rstd, dx, dw] = forwardBackward();
  std::vector<float> inPlace = dy, dwInPlace(kCols);
  mrt_rmsnorm_bwd_f32(inPlace.data(), x.data(), w.data(), rstd.data(),
                      inPlace.data(), dwInPlace.data(), kRows, kCols);
  EXPECT_EQ(inPlace, dx);
  EXPECT_EQ(dwInPlace, dw);
}

} // namespace
