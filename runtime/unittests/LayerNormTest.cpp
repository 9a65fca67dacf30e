#include "megatron_rt/layernorm.h"

#include "TestUtil.h"

using namespace mrt_test;

namespace {

constexpr int64_t kRows = 13, kCols = 77;
constexpr float kEps = 1e-5f;

struct Reference {
  std::vector<double> y, mean, rstd;
};

Reference referenceForward(const std::vector<double> &x,
                           const std::vector<double> &w,
                           const std::vector<double> &b) {
  Reference ref{std::vector<double>(x.size()), std::vector<double>(kRows),
                std::vector<double>(kRows)};
  for (int64_t r = 0; r < kRows; ++r) {
    double sum = 0.0, sq = 0.0;
    for (int64_t c = 0; c < kCols; ++c)
      sum += x[r * kCols + c];
    double mean = sum / kCols;
    for (int64_t c = 0; c < kCols; ++c)
      sq += (x[r * kCols + c] - mean) * (x[r * kCols + c] - mean);
    double rstd = 1.0 / std::sqrt(sq / kCols + kEps);
    for (int64_t c = 0; c < kCols; ++c)
      ref.y[r * kCols + c] = (x[r * kCols + c] - mean) * rstd * w[c] + b[c];
    ref.mean[r] = mean;
    ref.rstd[r] = rstd;
  }
  return ref;
}

class LayerNormTest : public ::testing::Test {
protected:
  // An offset mean makes a one-pass variance formula lose precision.
  std::vector<float> x = randomVector(kRows * kCols, 11, 2.0f, 4.0f);
  std::vector<float> w = randomVector(kCols, 12, 0.5f, 1.5f);
  std::vector<float> b = randomVector(kCols, 13);
  std::vector<float> dy = randomVector(kRows * kCols, 14);

  /// The forward's statistics and the backward's gradients of x, w and b;
  /// the parameter gradients start from garbage, which the kernel overwrites.
  struct Gradients {
    std::vector<float> mean, rstd, dx, dw, db;
  };
  Gradients forwardBackward() {
    Gradients g{std::vector<float>(kRows), std::vector<float>(kRows),
                std::vector<float>(x.size()), std::vector<float>(kCols, 123.0f),
                std::vector<float>(kCols, -7.0f)};
    std::vector<float> y(x.size());
    mrt_layernorm_fwd_f32(x.data(), w.data(), b.data(), y.data(),
                          g.mean.data(), g.rstd.data(), kRows, kCols, kEps);
    mrt_layernorm_bwd_f32(dy.data(), x.data(), w.data(), g.mean.data(),
                          g.rstd.data(), g.dx.data(), g.dw.data(), g.db.data(),
                          kRows, kCols);
    return g;
  }
};

TEST_F(LayerNormTest, ForwardMatchesNaive) {
  std::vector<float> y(x.size()), mean(kRows), rstd(kRows);
  mrt_layernorm_fwd_f32(x.data(), w.data(), b.data(), y.data(), mean.data(),
                        rstd.data(), kRows, kCols, kEps);
  Reference ref = referenceForward(toDouble(x), toDouble(w), toDouble(b));
  EXPECT_TRUE(allClose(y, ref.y));
  EXPECT_TRUE(allClose(mean, ref.mean));
  EXPECT_TRUE(allClose(rstd, ref.rstd));
}

TEST_F(LayerNormTest, ResidualForwardWritesTheSumAndItsNorm) {
  // x = residual + (delta + bias): the fused pass against the naive sum
  // followed by the naive norm.
  std::vector<float> residual = randomVector(kRows * kCols, 15, 1.0f, 3.0f);
  std::vector<float> delta = randomVector(kRows * kCols, 16);
  std::vector<float> bias = randomVector(kCols, 17);
  std::vector<double> want(x.size());
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kCols; ++c)
      want[r * kCols + c] = static_cast<double>(residual[r * kCols + c]) +
                            (delta[r * kCols + c] + bias[c]);
  std::vector<float> sum(x.size()), y(x.size()), mean(kRows), rstd(kRows);
  mrt_residual_layernorm_fwd_f32(residual.data(), delta.data(), bias.data(),
                                 sum.data(), w.data(), b.data(), y.data(),
                                 mean.data(), rstd.data(), kRows, kCols, kEps);
  EXPECT_TRUE(allClose(sum, want));
  Reference ref = referenceForward(want, toDouble(w), toDouble(b));
  EXPECT_TRUE(allClose(y, ref.y));
  EXPECT_TRUE(allClose(mean, ref.mean));
  EXPECT_TRUE(allClose(rstd, ref.rstd));
}

TEST_F(LayerNormTest, StatsAloneMatchNaive) {
  std::vector<float> mean(kRows), rstd(kRows);
  mrt_layernorm_stats_f32(x.data(), mean.data(), rstd.data(), kRows, kCols,
                          kEps);
  Reference ref = referenceForward(toDouble(x), toDouble(w), toDouble(b));
  EXPECT_TRUE(allClose(mean, ref.mean));
  EXPECT_TRUE(allClose(rstd, ref.rstd));
}

TEST_F(LayerNormTest, ForwardInPlace) {
  std::vector<float> y = x, mean(kRows), rstd(kRows);
  mrt_layernorm_fwd_f32(y.data(), w.data(), b.data(), y.data(), mean.data(),
                        rstd.data(), kRows, kCols, kEps);
  EXPECT_TRUE(
      allClose(y, referenceForward(toDouble(x), toDouble(w), toDouble(b)).y));
}

TEST_F(LayerNormTest, BackwardMatchesNaiveAndOverwritesParamGrads) {
  auto [mean, rstd, dx, dw, db] = forwardBackward();

  Reference ref = referenceForward(toDouble(x), toDouble(w), toDouble(b));
  std::vector<double> dxRef(x.size()), dwRef(kCols, 0.0), dbRef(kCols, 0.0);
  for (int64_t r = 0; r < kRows; ++r) {
    double meanG = 0.0, meanGXhat = 0.0;
    for (int64_t c = 0; c < kCols; ++c) {
      double xhat = (x[r * kCols + c] - ref.mean[r]) * ref.rstd[r];
      double g = double(dy[r * kCols + c]) * w[c];
      meanG += g / kCols;
      meanGXhat += g * xhat / kCols;
      dwRef[c] += dy[r * kCols + c] * xhat;
      dbRef[c] += dy[r * kCols + c];
    }
    for (int64_t c = 0; c < kCols; ++c) {
      double xhat = (x[r * kCols + c] - ref.mean[r]) * ref.rstd[r];
      double g = double(dy[r * kCols + c]) * w[c];
      dxRef[r * kCols + c] = ref.rstd[r] * (g - meanG - xhat * meanGXhat);
    }
  }
  EXPECT_TRUE(allClose(dx, dxRef));
  EXPECT_TRUE(allClose(dw, dwRef));
  EXPECT_TRUE(allClose(db, dbRef));
}

// Checks dx against finite differences of the naive forward, independently
// of the hand-derived formula above.
TEST_F(LayerNormTest, BackwardAgreesWithFiniteDifferences) {
  std::vector<float> dx = forwardBackward().dx;
  auto loss = [&](const std::vector<double> &xs) {
    std::vector<double> ys = referenceForward(xs, toDouble(w), toDouble(b)).y;
    double sum = 0.0;
    for (size_t i = 0; i < ys.size(); ++i)
      sum += dy[i] * ys[i];
    return sum;
  };
  std::vector<double> u = toDouble(randomVector(x.size(), 15));
  EXPECT_TRUE(relativelyClose(
      dotProduct(dx, u), directionalDerivative(loss, toDouble(x), u), 1e-4));
}

TEST_F(LayerNormTest, BackwardInPlaceOverDy) {
  auto [mean, rstd, dx, dw, db] = forwardBackward();
  std::vector<float> inPlace = dy, dwInPlace(kCols), dbInPlace(kCols);
  mrt_layernorm_bwd_f32(inPlace.data(), x.data(), w.data(), mean.data(),
                        rstd.data(), inPlace.data(), dwInPlace.data(),
                        dbInPlace.data(), kRows, kCols);
  EXPECT_EQ(inPlace, dx);
  EXPECT_EQ(dwInPlace, dw);
  EXPECT_EQ(dbInPlace, db);
}

} // namespace
