#include "megatron_rt/attention.h"

#include "TestUtil.h"

#include <algorithm>
#include <string>

using namespace mrt_test;

namespace {

struct Shape {
  int64_t B, T, H, D;
  int64_t qkvSize() const { return B * T * 3 * H * D; }
  int64_t outSize() const { return B * T * H * D; }
  // section 0/1/2 = q/k/v
  int64_t qkvIndex(int64_t b, int64_t t, int64_t section, int64_t h,
                   int64_t d) const {
    return ((b * T + t) * 3 + section) * H * D + h * D + d;
  }
  int64_t outIndex(int64_t b, int64_t t, int64_t h, int64_t d) const {
    return (b * T + t) * H * D + h * D + d;
  }
};

struct Reference {
  std::vector<double> out, lse;
};

// Probabilities of query t over keys 0..t of one (b, h), straight from the
// definition; also returns the log-sum-exp of the scaled scores.
std::vector<double> probabilities(const Shape &s,
                                  const std::vector<double> &qkv, int64_t b,
                                  int64_t h, int64_t t, double *lse) {
  std::vector<double> p(t + 1);
  double scale = 1.0 / std::sqrt(double(s.D)), maxScore = -INFINITY;
  for (int64_t j = 0; j <= t; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < s.D; ++d)
      dot += qkv[s.qkvIndex(b, t, 0, h, d)] * qkv[s.qkvIndex(b, j, 1, h, d)];
    p[j] = dot * scale;
    maxScore = std::max(maxScore, p[j]);
  }
  double sum = 0.0;
  for (double &x : p)
    sum += (x = std::exp(x - maxScore));
  for (double &x : p)
    x /= sum;
  *lse = maxScore + std::log(sum);
  return p;
}

Reference referenceForward(const Shape &s, const std::vector<double> &qkv) {
  Reference ref{std::vector<double>(s.outSize(), 0.0),
                std::vector<double>(s.B * s.H * s.T)};
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        auto p =
            probabilities(s, qkv, b, h, t, &ref.lse[(b * s.H + h) * s.T + t]);
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t d = 0; d < s.D; ++d)
            ref.out[s.outIndex(b, t, h, d)] +=
                p[j] * qkv[s.qkvIndex(b, j, 2, h, d)];
      }
  return ref;
}

// dv = P^T dout, dP = dout v^T, dS = P (dP - rowsum(P dP)), dq = dS k scale,
// dk = dS^T q scale, per (b, h).
std::vector<double> referenceBackward(const Shape &s,
                                      const std::vector<double> &qkv,
                                      const std::vector<float> &dout) {
  std::vector<double> dqkv(s.qkvSize(), 0.0);
  double scale = 1.0 / std::sqrt(double(s.D)), lse;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        auto p = probabilities(s, qkv, b, h, t, &lse);
        std::vector<double> dp(t + 1, 0.0);
        double rowDot = 0.0;
        for (int64_t j = 0; j <= t; ++j) {
          for (int64_t d = 0; d < s.D; ++d)
            dp[j] +=
                dout[s.outIndex(b, t, h, d)] * qkv[s.qkvIndex(b, j, 2, h, d)];
          rowDot += p[j] * dp[j];
        }
        for (int64_t j = 0; j <= t; ++j) {
          double ds = p[j] * (dp[j] - rowDot) * scale;
          for (int64_t d = 0; d < s.D; ++d) {
            dqkv[s.qkvIndex(b, j, 2, h, d)] +=
                p[j] * dout[s.outIndex(b, t, h, d)];
            dqkv[s.qkvIndex(b, t, 0, h, d)] +=
                ds * qkv[s.qkvIndex(b, j, 1, h, d)];
            dqkv[s.qkvIndex(b, j, 1, h, d)] +=
                ds * qkv[s.qkvIndex(b, t, 0, h, d)];
          }
        }
      }
  return dqkv;
}

class AttentionTest : public ::testing::TestWithParam<Shape> {
protected:
  // Inputs of a few units give peaked softmax rows, as trained models do.
  std::vector<float> qkv = randomVector(GetParam().qkvSize(), 31, -2.0f, 2.0f);
  std::vector<float> dout = randomVector(GetParam().outSize(), 32);
  std::vector<float> out = std::vector<float>(GetParam().outSize());
  std::vector<float> lse =
      std::vector<float>(GetParam().B * GetParam().H * GetParam().T);

  void runForward() {
    const Shape s = GetParam();
    mrt_attention_fwd_f32(qkv.data(), out.data(), lse.data(), s.B, s.T, s.H,
                          s.D);
  }

  std::vector<float> runBackward() {
    const Shape s = GetParam();
    runForward();
    std::vector<float> dqkv(s.qkvSize(), 999.0f); // must be overwritten
    mrt_attention_bwd_f32(qkv.data(), out.data(), dout.data(), lse.data(),
                          dqkv.data(), s.B, s.T, s.H, s.D);
    return dqkv;
  }
};

TEST_P(AttentionTest, ForwardMatchesNaive) {
  runForward();
  Reference ref = referenceForward(GetParam(), toDouble(qkv));
  EXPECT_TRUE(allClose(out, ref.out));
  EXPECT_TRUE(allClose(lse, ref.lse));
}

TEST_P(AttentionTest, BackwardMatchesNaive) {
  std::vector<float> dqkv = runBackward();
  EXPECT_TRUE(
      allClose(dqkv, referenceBackward(GetParam(), toDouble(qkv), dout), 2e-5));
}

TEST_P(AttentionTest, BackwardAgreesWithFiniteDifferences) {
  const Shape s = GetParam();
  std::vector<float> dqkv = runBackward();
  auto loss = [&](const std::vector<double> &x) {
    std::vector<double> o = referenceForward(s, x).out;
    double sum = 0.0;
    for (size_t i = 0; i < o.size(); ++i)
      sum += dout[i] * o[i];
    return sum;
  };
  std::vector<double> u = toDouble(randomVector(qkv.size(), 33));
  EXPECT_TRUE(relativelyClose(dotProduct(dqkv, u),
                              directionalDerivative(loss, toDouble(qkv), u),
                              1e-4));
}

// T = 150 spans three key blocks with a partial last one (and D = 20 two
// 8x8 transposed blocks and a rest); T = 5 is less than one block; T = 1
// attends only to itself; T = D = 64, GPT-2's heads, is whole blocks only.
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(Shape{2, 150, 3, 20},
                                           Shape{1, 64, 2, 64},
                                           Shape{3, 5, 2, 7},
                                           Shape{1, 1, 2, 3}),
                         [](const auto &info) {
                           const Shape &s = info.param;
                           return "B" + std::to_string(s.B) + "_T" +
                                  std::to_string(s.T) + "_H" +
                                  std::to_string(s.H) + "_D" +
                                  std::to_string(s.D);
                         });

} // namespace

// --- generation: the KV cache -----------------------------------------------

namespace {

// Decoding token by token over the cache gives what causal attention over
// the whole sequence gives: layer 1 of 2-layer caches of 12 positions, a
// prompt of 3 tokens as one chunk at position 0, then one token a call.
TEST(CachedAttention, TokenByTokenEqualsWholeSequence) {
  const int64_t L = 2, B = 2, T = 7, H = 3, D = 5, N = 12, layer = 1;
  const int64_t width = 3 * H * D, prompt = 3;
  const std::vector<float> qkv = randomVector(B * T * width, 41, -2.0f, 2.0f);
  std::vector<float> whole(B * T * H * D), lse(B * H * T);
  mrt_attention_fwd_f32(qkv.data(), whole.data(), lse.data(), B, T, H, D);

  std::vector<float> keys(L * B * H * N * D, 0.0f), values = keys;
  std::vector<double> decoded(B * T * H * D);
  // The chunk [start, start + len) of every sequence, as its own [B, len]
  // qkv, stored and attended.
  auto step = [&](int64_t start, int64_t len) {
    std::vector<float> chunk(B * len * width), out(B * len * H * D);
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(qkv.begin() + (b * T + start) * width, len * width,
                  chunk.begin() + b * len * width);
    const std::vector<int32_t> positions(B, static_cast<int32_t>(start));
    for (auto [cache, section] : {std::pair{&keys, 1}, std::pair{&values, 2}})
      mrt_kv_cache_store_f32(chunk.data(), cache->data(), positions.data(),
                             section, layer, L, B, len, H, D, N);
    mrt_attention_cached_f32(chunk.data(), keys.data(), values.data(),
                             positions.data(), out.data(), layer, L, B, len, H,
                             D, N);
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(out.begin() + b * len * H * D, len * H * D,
                  decoded.begin() + (b * T + start) * H * D);
  };
  step(0, prompt);
  for (int64_t t = prompt; t < T; ++t)
    step(t, 1);
  EXPECT_TRUE(allClose(whole, decoded));
}

TEST(CachedAttentionDeathTest, PositionBeyondTheCacheIsFatal) {
  const int64_t H = 1, D = 2, N = 4;
  const std::vector<float> qkv(2 * 3 * H * D, 1.0f);
  std::vector<float> cache(N * H * D);
  const int32_t positions[] = {3};
  EXPECT_DEATH(mrt_kv_cache_store_f32(qkv.data(), cache.data(), positions, 1,
                                      0, 1, 1, 2, H, D, N),
               "sequence 0's tokens at positions \\[3, 5\\) do not fit the KV "
               "cache of 4 positions");
  EXPECT_DEATH(mrt_kv_cache_store_f32(qkv.data(), cache.data(), positions, 3,
                                      0, 1, 1, 2, H, D, N),
               "KV cache section 3 \\(1: keys, 2: values\\)");
}

} // namespace
