// The kernels' vectorisable exp and tanh against libm's: exp over the range
// the cross-entropy uses (logit minus row maximum), tanh over GELU's.
#include "../lib/vec.h"

#include <gtest/gtest.h>

#include <cmath>

TEST(Vec, ExpNonPositiveMatchesLibm) {
  double worst = 0.0;
  for (float x = -87.0f; x <= 0.0f; x += 0.0137f) {
    double want = std::exp(static_cast<double>(x));
    double error = std::abs(mrt::expNonPositive(x) - want) / want;
    worst = std::max(worst, error);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(mrt::expNonPositive(0.0f), 1.0f);
  EXPECT_EQ(mrt::expNonPositive(-200.0f), 0.0f);
  EXPECT_EQ(mrt::expNonPositive(-INFINITY), 0.0f);
  // A diverged row: NaN in, NaN out, and no undefined conversion on the way
  // (the sanitizer build checks that).
  EXPECT_TRUE(std::isnan(mrt::expNonPositive(NAN)));
}

TEST(Vec, TanhMatchesLibmInAbsoluteError) {
  double worst = 0.0;
  for (float x = -12.0f; x <= 12.0f; x += 0.00731f)
    worst = std::max(
        worst, std::abs(mrt::tanhOf(x) - std::tanh(static_cast<double>(x))));
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(mrt::tanhOf(0.0f), 0.0f);
  EXPECT_EQ(mrt::tanhOf(100.0f), 1.0f);
  EXPECT_EQ(mrt::tanhOf(-INFINITY), -1.0f);
  EXPECT_TRUE(std::isnan(mrt::tanhOf(NAN)));
}
