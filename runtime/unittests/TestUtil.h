// Shared helpers of the runtime unit tests: random inputs and the comparison
// of fp32 kernel results with double-precision naive references.
#ifndef MEGATRON_RT_UNITTESTS_TESTUTIL_H
#define MEGATRON_RT_UNITTESTS_TESTUTIL_H

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

// The trailing arguments of the attention kernels that turn their
// probability dropout off (megatron_rt/attention.h).
#define kNoDropout 0.0f, 0, 0, 0, 0, 0, 0

namespace mrt_test {

inline std::vector<float> randomVector(size_t n, uint32_t seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

inline std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

// |actual - expected| <= rtol * (|expected| + rms(expected)) element-wise:
// relative where values are large, and scaled by the tensor's magnitude where
// an element is near zero (where fp32 rounding of the inputs dominates).
inline ::testing::AssertionResult allClose(const std::vector<float> &actual,
                                           const std::vector<double> &expected,
                                           double rtol = 1e-5) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != " << expected.size();
  double sumSq = 0.0;
  for (double e : expected)
    sumSq += e * e;
  double rms = expected.empty() ? 0.0 : std::sqrt(sumSq / expected.size());
  size_t bad = 0, firstBad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double err = std::fabs(actual[i] - expected[i]);
    if (!(err <= rtol * (std::fabs(expected[i]) + rms)) && bad++ == 0)
      firstBad = i;
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << actual.size() << " elements differ; first at "
         << firstBad << ": " << actual[firstBad] << " vs expected "
         << expected[firstBad] << " (rms " << rms << ", rtol " << rtol << ")";
}

inline ::testing::AssertionResult
relativelyClose(double actual, double expected, double rtol = 1e-5) {
  if (std::fabs(actual - expected) <= rtol * std::fabs(expected))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << actual << " vs expected " << expected << " (rtol " << rtol << ")";
}

// Central difference of f at x along direction u, in double: an independent
// check of a hand-derived backward pass against the naive forward.
inline double directionalDerivative(
    const std::function<double(const std::vector<double> &)> &f,
    const std::vector<double> &x, const std::vector<double> &u,
    double h = 1e-4) {
  std::vector<double> plus = x, minus = x;
  for (size_t i = 0; i < x.size(); ++i) {
    plus[i] += h * u[i];
    minus[i] -= h * u[i];
  }
  return (f(plus) - f(minus)) / (2 * h);
}

inline double dotProduct(const std::vector<float> &a,
                         const std::vector<double> &b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += a[i] * b[i];
  return sum;
}

} // namespace mrt_test

#endif // MEGATRON_RT_UNITTESTS_TESTUTIL_H
