#include "megatron_rt/attention.h"
#include "megatron_rt/dropout.h"

#include "TestUtil.h"

#include <algorithm>
#include <string>

using namespace mrt_test;

namespace {

// Tokens of H query heads and KV key/value heads of width D, stored as rows
// [q (H D) | k (KV D) | v (KV D)] of one packed buffer. The kernels read it
// in place at its row stride (a fused projection), or copied into three
// tensors of their own (`separate`).
struct Shape {
  int64_t B, T, H, KV, D;
  bool separate;
  int64_t row() const { return (H + 2 * KV) * D; }
  int64_t packedSize() const { return B * T * row(); }
  int64_t outSize() const { return B * T * H * D; }
  int64_t group() const { return H / KV; }
  // Element d of query head h (section 0) or key/value head g (sections 1
  // and 2) of token t of sequence b in the packed buffer.
  int64_t index(int64_t b, int64_t t, int section, int64_t head,
                int64_t d) const {
    int64_t column = section == 0   ? head * D
                     : section == 1 ? (H + head) * D
                                    : (H + KV + head) * D;
    return (b * T + t) * row() + column + d;
  }
  int64_t outIndex(int64_t b, int64_t t, int64_t h, int64_t d) const {
    return (b * T + t) * H * D + h * D + d;
  }
};

struct Reference {
  std::vector<double> out, lse;
};

// The probability dropout the kernels are asked for; rate 0 turns it off.
struct Dropout {
  float rate = 0.0f;
  int64_t seed = 0, step = 0, stream = 0, batchOffset = 0, headOffset = 0,
          globalHeads = 0;
  // What probability (t, j) of head h of sequence b is multiplied by: one
  // element's bits, drawn on their own from its global index.
  double factor(const Shape &s, int64_t b, int64_t h, int64_t t,
                int64_t j) const {
    if (rate == 0.0f)
      return 1.0;
    uint64_t index = (((b + batchOffset) * globalHeads + h + headOffset) * s.T +
                      t) * s.T + j;
    uint32_t words[4];
    mrt_dropout_block(seed, step, stream, index / 4, words);
    return words[index % 4] >= mrt_dropout_threshold(rate) ? 1.0 / (1.0 - rate)
                                                           : 0.0;
  }
};

// Probabilities of query t of head h over keys 0..t of its key/value head,
// straight from the definition; also returns the log-sum-exp of the scaled
// scores.
std::vector<double> probabilities(const Shape &s,
                                  const std::vector<double> &x, int64_t b,
                                  int64_t h, int64_t t, double *lse) {
  std::vector<double> p(t + 1);
  double scale = 1.0 / std::sqrt(double(s.D)), maxScore = -INFINITY;
  const int64_t g = h / s.group();
  for (int64_t j = 0; j <= t; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < s.D; ++d)
      dot += x[s.index(b, t, 0, h, d)] * x[s.index(b, j, 1, g, d)];
    p[j] = dot * scale;
    maxScore = std::max(maxScore, p[j]);
  }
  double sum = 0.0;
  for (double &v : p)
    sum += (v = std::exp(v - maxScore));
  for (double &v : p)
    v /= sum;
  *lse = maxScore + std::log(sum);
  return p;
}

Reference referenceForward(const Shape &s, const std::vector<double> &x,
                           const Dropout &drop) {
  Reference ref{std::vector<double>(s.outSize(), 0.0),
                std::vector<double>(s.B * s.H * s.T)};
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        auto p = probabilities(s, x, b, h, t, &ref.lse[(b * s.H + h) * s.T + t]);
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t d = 0; d < s.D; ++d)
            ref.out[s.outIndex(b, t, h, d)] +=
                p[j] * drop.factor(s, b, h, t, j) *
                x[s.index(b, j, 2, h / s.group(), d)];
      }
  return ref;
}

// With F the dropout factors: dv = (P F)^T dout, dP = dout v^T, dS = P (F
// dP - rowsum(P F dP)), dq = dS k scale, dk = dS^T q scale, per (b, h),
// summed into the key/value head's; in the packed layout.
std::vector<double> referenceBackward(const Shape &s,
                                      const std::vector<double> &x,
                                      const std::vector<float> &dout,
                                      const Dropout &drop) {
  std::vector<double> dx(s.packedSize(), 0.0);
  double scale = 1.0 / std::sqrt(double(s.D)), lse;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        const int64_t g = h / s.group();
        auto p = probabilities(s, x, b, h, t, &lse);
        std::vector<double> dp(t + 1, 0.0), f(t + 1);
        double rowDot = 0.0;
        for (int64_t j = 0; j <= t; ++j) {
          f[j] = drop.factor(s, b, h, t, j);
          for (int64_t d = 0; d < s.D; ++d)
            dp[j] += dout[s.outIndex(b, t, h, d)] * x[s.index(b, j, 2, g, d)];
          rowDot += p[j] * f[j] * dp[j];
        }
        for (int64_t j = 0; j <= t; ++j) {
          double ds = p[j] * (f[j] * dp[j] - rowDot) * scale;
          for (int64_t d = 0; d < s.D; ++d) {
            dx[s.index(b, j, 2, g, d)] +=
                p[j] * f[j] * dout[s.outIndex(b, t, h, d)];
            dx[s.index(b, t, 0, h, d)] += ds * x[s.index(b, j, 1, g, d)];
            dx[s.index(b, j, 1, g, d)] += ds * x[s.index(b, t, 0, h, d)];
          }
        }
      }
  return dx;
}

// Section `section` (0: q, 1: k, 2: v) of the packed rows as a compact
// tensor, and back.
std::vector<float> unpack(const Shape &s, const std::vector<float> &packed,
                          int section) {
  const int64_t heads = section == 0 ? s.H : s.KV;
  std::vector<float> out(s.B * s.T * heads * s.D);
  for (int64_t bt = 0; bt < s.B * s.T; ++bt)
    std::copy_n(packed.begin() + s.index(0, bt, section, 0, 0), heads * s.D,
                out.begin() + bt * heads * s.D);
  return out;
}
void pack(const Shape &s, const std::vector<float> &compact, int section,
          std::vector<float> &packed) {
  const int64_t heads = section == 0 ? s.H : s.KV;
  for (int64_t bt = 0; bt < s.B * s.T; ++bt)
    std::copy_n(compact.begin() + bt * heads * s.D, heads * s.D,
                packed.begin() + s.index(0, bt, section, 0, 0));
}

// The kernels' trailing arguments for the fixture's `drop`.
#define DROPOUT_ARGS                                                           \
  drop.rate, drop.seed, drop.step, drop.stream, drop.batchOffset,              \
      drop.headOffset, drop.globalHeads

class AttentionTest : public ::testing::TestWithParam<Shape> {
protected:
  const Shape s = GetParam();
  // Inputs of a few units give peaked softmax rows, as trained models do.
  std::vector<float> x = randomVector(s.packedSize(), 31, -2.0f, 2.0f);
  std::vector<float> dout = randomVector(s.outSize(), 32);
  std::vector<float> out = std::vector<float>(s.outSize());
  std::vector<float> lse = std::vector<float>(s.B * s.H * s.T);
  // The separate tensors, when the shape asks for them.
  std::vector<float> q = unpack(s, x, 0), k = unpack(s, x, 1),
                     v = unpack(s, x, 2);
  Dropout drop;

  void runForward() {
    if (s.separate)
      mrt_attention_fwd_f32(q.data(), k.data(), v.data(), s.H * s.D,
                            s.KV * s.D, out.data(), lse.data(), s.B, s.T, s.H,
                            s.KV, s.D, DROPOUT_ARGS);
    else
      mrt_attention_fwd_f32(&x[s.index(0, 0, 0, 0, 0)],
                            &x[s.index(0, 0, 1, 0, 0)],
                            &x[s.index(0, 0, 2, 0, 0)], s.row(), s.row(),
                            out.data(), lse.data(), s.B, s.T, s.H, s.KV, s.D,
                            DROPOUT_ARGS);
  }

  /// The gradient in the packed layout; every element must be overwritten.
  std::vector<float> runBackward() {
    runForward();
    std::vector<float> dx(s.packedSize(), 999.0f);
    if (s.separate) {
      std::vector<float> dq(q.size(), 999.0f), dk(k.size(), 999.0f),
          dv(v.size(), 999.0f);
      mrt_attention_bwd_f32(q.data(), k.data(), v.data(), s.H * s.D,
                            s.KV * s.D, out.data(), dout.data(), lse.data(),
                            dq.data(), dk.data(), dv.data(), s.B, s.T, s.H,
                            s.KV, s.D, DROPOUT_ARGS);
      pack(s, dq, 0, dx);
      pack(s, dk, 1, dx);
      pack(s, dv, 2, dx);
    } else {
      mrt_attention_bwd_f32(
          &x[s.index(0, 0, 0, 0, 0)], &x[s.index(0, 0, 1, 0, 0)],
          &x[s.index(0, 0, 2, 0, 0)], s.row(), s.row(), out.data(),
          dout.data(), lse.data(), &dx[s.index(0, 0, 0, 0, 0)],
          &dx[s.index(0, 0, 1, 0, 0)], &dx[s.index(0, 0, 2, 0, 0)], s.B, s.T,
          s.H, s.KV, s.D, DROPOUT_ARGS);
    }
    return dx;
  }
};

TEST_P(AttentionTest, ForwardMatchesNaive) {
  runForward();
  Reference ref = referenceForward(s, toDouble(x), drop);
  EXPECT_TRUE(allClose(out, ref.out));
  EXPECT_TRUE(allClose(lse, ref.lse));
}

TEST_P(AttentionTest, BackwardMatchesNaive) {
  std::vector<float> dx = runBackward();
  EXPECT_TRUE(
      allClose(dx, referenceBackward(s, toDouble(x), dout, drop), 2e-5));
}

// The rank's sequences and heads start past the global tensor's first, so
// the mask is read at offsets; lse stays that of the undropped softmax.
TEST_P(AttentionTest, DropoutMatchesNaive) {
  drop = Dropout{0.25f, 0x5eed, 3, 17, 1, 2, s.H + 3};
  runForward();
  Reference ref = referenceForward(s, toDouble(x), drop);
  EXPECT_TRUE(allClose(out, ref.out));
  EXPECT_TRUE(allClose(lse, ref.lse));
  std::vector<float> dx = runBackward();
  EXPECT_TRUE(
      allClose(dx, referenceBackward(s, toDouble(x), dout, drop), 2e-5));
}

TEST_P(AttentionTest, BackwardAgreesWithFiniteDifferences) {
  std::vector<float> dx = runBackward();
  auto loss = [&](const std::vector<double> &xs) {
    std::vector<double> o = referenceForward(s, xs, drop).out;
    double sum = 0.0;
    for (size_t i = 0; i < o.size(); ++i)
      sum += dout[i] * o[i];
    return sum;
  };
  std::vector<double> u = toDouble(randomVector(x.size(), 33));
  EXPECT_TRUE(relativelyClose(dotProduct(dx, u),
                              directionalDerivative(loss, toDouble(x), u),
                              1e-4));
}

// Multi-head on a fused qkv (GPT-2): T = 150 spans three key blocks with a
// partial last one (and D = 20 two 8x8 transposed blocks and a rest); T = 5
// is less than one block; T = 1 attends only to itself; T = D = 64, GPT-2's
// heads, is whole blocks only. Grouped-query (Llama): two query heads per
// key/value head on separate tensors, multi-query (KV = 1), and groups of
// three read in place from packed rows.
INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(Shape{2, 150, 3, 3, 20, false},
                      Shape{1, 64, 2, 2, 64, false},
                      Shape{3, 5, 2, 2, 7, false}, Shape{1, 1, 2, 2, 3, false},
                      Shape{2, 150, 4, 2, 20, true},
                      Shape{1, 64, 4, 1, 64, true},
                      Shape{3, 5, 6, 2, 7, false},
                      Shape{2, 33, 2, 2, 16, true}),
    [](const auto &info) {
      const Shape &s = info.param;
      return "B" + std::to_string(s.B) + "_T" + std::to_string(s.T) + "_H" +
             std::to_string(s.H) + "_KV" + std::to_string(s.KV) + "_D" +
             std::to_string(s.D) + (s.separate ? "_separate" : "_packed");
    });

// One token of 4 heads of width 1, dropped at `rate` with the rank's heads
// starting at `headOffset` of 4 global heads.
void attendOneToken(float rate, int64_t headOffset) {
  std::vector<float> x(4 * 8, 1.0f), out(4 * 4), lse(4);
  mrt_attention_fwd_f32(x.data(), x.data(), x.data(), 8, 8, out.data(),
                        lse.data(), 1, 1, 4, 4, 1, rate, 0, 0, 0, 0,
                        headOffset, 4);
}

TEST(AttentionDeathTest, DropoutRateOutsideRangeIsFatal) {
  EXPECT_DEATH(attendOneToken(1.0f, 0),
               "attention: dropout rate 1 is outside \\[0, 1\\)");
}

TEST(AttentionDeathTest, DropoutHeadsOutsideTheGlobalHeadsAreFatal) {
  EXPECT_DEATH(attendOneToken(0.5f, 2),
               "attention: heads 2..5 are outside the 4 global heads");
}

TEST(AttentionDeathTest, KeyValueHeadsMustDivideQueryHeads) {
  std::vector<float> x(4 * 8, 1.0f), out(4 * 4), lse(4);
  EXPECT_DEATH(mrt_attention_fwd_f32(x.data(), x.data(), x.data(), 8, 8,
                                     out.data(), lse.data(), 1, 1, 4, 3, 1,
                                     kNoDropout),
               "attention: 3 key/value heads do not divide 4 query heads");
}

} // namespace

// --- generation: the KV cache -----------------------------------------------

namespace {

// Decoding token by token over the cache gives what causal attention over
// the whole sequence gives: layer 1 of 2-layer caches of 12 positions, a
// prompt of 3 tokens as one chunk at position 0, then one token a call;
// two query heads per cache head, read in place from packed rows.
TEST(CachedAttention, TokenByTokenEqualsWholeSequence) {
  const Shape s{2, 7, 4, 2, 5, false};
  const int64_t L = 2, N = 12, layer = 1, prompt = 3;
  const int64_t B = s.B, T = s.T, H = s.H, KV = s.KV, D = s.D, W = s.row();
  const std::vector<float> x = randomVector(s.packedSize(), 41, -2.0f, 2.0f);
  std::vector<float> whole(B * T * H * D), lse(B * H * T);
  mrt_attention_fwd_f32(&x[0], &x[H * D], &x[(H + KV) * D], W, W,
                        whole.data(), lse.data(), B, T, H, KV, D, kNoDropout);

  std::vector<float> keys(L * B * KV * N * D, 0.0f), values = keys;
  std::vector<double> decoded(B * T * H * D);
  // The chunk [start, start + len) of every sequence, as its own [B, len]
  // packed rows, stored and attended.
  auto step = [&](int64_t start, int64_t len) {
    std::vector<float> chunk(B * len * W), out(B * len * H * D);
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(x.begin() + (b * T + start) * W, len * W,
                  chunk.begin() + b * len * W);
    const std::vector<int32_t> positions(B, static_cast<int32_t>(start));
    mrt_kv_cache_store_f32(&chunk[H * D], W, keys.data(), positions.data(),
                           layer, L, B, len, KV, D, N);
    mrt_kv_cache_store_f32(&chunk[(H + KV) * D], W, values.data(),
                           positions.data(), layer, L, B, len, KV, D, N);
    mrt_attention_cached_f32(chunk.data(), W, keys.data(), values.data(),
                             positions.data(), out.data(), layer, L, B, len, H,
                             KV, D, N);
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(out.begin() + b * len * H * D, len * H * D,
                  decoded.begin() + (b * T + start) * H * D);
  };
  step(0, prompt);
  for (int64_t t = prompt; t < T; ++t)
    step(t, 1);
  EXPECT_TRUE(allClose(whole, decoded));
}

TEST(CachedAttentionDeathTest, CacheHeadsMustDivideQueryHeads) {
  std::vector<float> q(4), cache(4 * 2), out(4);
  const int32_t positions[] = {0};
  EXPECT_DEATH(mrt_attention_cached_f32(q.data(), 4, cache.data(),
                                        cache.data(), positions, out.data(),
                                        0, 1, 1, 1, 4, 3, 1, 2),
               "generation: 3 cache heads do not divide 4 query heads");
}

TEST(CachedAttentionDeathTest, PositionBeyondTheCacheIsFatal) {
  const int64_t H = 1, D = 2, N = 4;
  const std::vector<float> keys(2 * H * D, 1.0f);
  std::vector<float> cache(N * H * D);
  const int32_t positions[] = {3};
  EXPECT_DEATH(mrt_kv_cache_store_f32(keys.data(), H * D, cache.data(),
                                      positions, 0, 1, 1, 2, H, D, N),
               "sequence 0's tokens at positions \\[3, 5\\) do not fit the KV "
               "cache of 4 positions");
}

} // namespace
