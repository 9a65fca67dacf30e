#include "megatron_rt/attention.h"
#include "megatron_rt/dropout.h"

#include "attention_dropout.h"
#include "bf16.h"
#include "fatal.h"
#include "isa.h"
#include "vec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

// Flash-attention style. Each (b, h) is independent and writes its own
// columns of the outputs, so threads split (b, h). Query head h reads key
// and value head h / (H / KV) (grouped-query attention; KV = H is
// multi-head attention). Per head, the keys and
// values are first copied into padded, cache-friendly layouts; then groups of
// kGroupRows queries walk the key blocks they may see, keeping a running
// softmax, so at most kGroupRows x kKeyBlock scores exist at any time. All
// products go through one register-blocked kernel (tileMultiply).

namespace {

constexpr int64_t kKeyBlock = 64;  // keys per block
constexpr int64_t kGroupRows = 16; // queries sharing one pass over the keys
// Rows per register tile: kRows independent accumulator chains keep both
// FMA units busy past their latency (4 left them half idle: attention ran
// at half the speed); 16 would spill AVX2's 16 registers.
constexpr int64_t kRows = 8;
constexpr int64_t kLanes = 8;      // columns per register tile
static_assert(kGroupRows % kRows == 0 && kKeyBlock % kRows == 0 &&
                  kKeyBlock % kLanes == 0 && kLanes % 4 == 0,
              "tiles must divide the blocks they cover");

int64_t roundUp(int64_t x, int64_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

struct Shape {
  int64_t B, T, H, KV, D;
  int64_t Tpad() const { return roundUp(T, kKeyBlock); }
  int64_t Dpad() const { return roundUp(D, kLanes); }
  // Query heads per key/value head.
  int64_t group() const { return H / KV; }
};

// The scores' scale 1/sqrt(D).
float scoreScale(const Shape &s) {
  return 1.0f / std::sqrt(static_cast<float>(s.D));
}

// Where the heads' rows lie (attention.h): q [B,T,*] with row stride ldq,
// k and v with ldkv; sections of one fused tensor or tensors of their own.
template <typename Ptr> struct Heads {
  Ptr q, k, v;
  int64_t ldq, ldkv;
  // Row t of query head h, and of key/value head g, of sequence b.
  Ptr query(const Shape &s, int64_t b, int64_t t, int64_t h) const {
    return q + (b * s.T + t) * ldq + h * s.D;
  }
  Ptr key(const Shape &s, int64_t b, int64_t t, int64_t g) const {
    return k + (b * s.T + t) * ldkv + g * s.D;
  }
  Ptr value(const Shape &s, int64_t b, int64_t t, int64_t g) const {
    return v + (b * s.T + t) * ldkv + g * s.D;
  }
};

// Offset of row t of one head inside out/dout [B,T,HD].
int64_t outOffset(const Shape &s, int64_t b, int64_t t, int64_t h) {
  return (b * s.T + t) * s.H * s.D + h * s.D;
}

// kLanes floats as one value: an AVX register in the x86-64-v3 copy of the
// kernels (isa.h), two SSE registers on the baseline, portable GCC/Clang
// vector code elsewhere.
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

// By reference: a 32-byte vector passed by value would take another ABI on
// the baseline than in the AVX copy.
inline void loadVec(Vec &v, const float *p) { std::memcpy(&v, p, sizeof(v)); }

inline void storeVec(float *p, const Vec &v) { std::memcpy(p, &v, sizeof(v)); }

// c[r][j] (+)= sum_k a[r][k] * b[k][j] for r < kRows and j < width, a multiple
// of kLanes. The kRows x kLanes accumulators stay in registers, so each
// element of b loaded feeds kRows rows.
void tileMultiply(const float *const a[kRows], const float *b, int64_t ldb,
                  int64_t depth, int64_t width, float *c, int64_t ldc,
                  bool accumulate) {
  for (int64_t j0 = 0; j0 < width; j0 += kLanes) {
    Vec acc[kRows];
    for (int64_t r = 0; r < kRows; ++r) {
      acc[r] = Vec{};
      if (accumulate)
        loadVec(acc[r], c + r * ldc + j0);
    }
    for (int64_t k = 0; k < depth; ++k) {
      Vec bk;
      loadVec(bk, b + k * ldb + j0);
      for (int64_t r = 0; r < kRows; ++r)
        acc[r] += a[r][k] * bk;
    }
    for (int64_t r = 0; r < kRows; ++r)
      storeVec(c + r * ldc + j0, acc[r]);
  }
}

// Row pointers of the register tile starting at row r0 of a row-major
// matrix with leading dimension ld.
struct TileRows {
  TileRows(const float *base, int64_t ld, int64_t r0 = 0) {
    for (int64_t r = 0; r < kRows; ++r)
      rows[r] = base + (r0 + r) * ld;
  }
  const float *rows[kRows];
};

// c (+)= a b for a [kGroupRows, depth] (leading dimension lda), one register
// tile of rows at a time.
void groupMultiply(const float *a, int64_t lda, const float *b, int64_t ldb,
                   int64_t depth, int64_t width, float *c, int64_t ldc,
                   bool accumulate) {
  for (int64_t r0 = 0; r0 < kGroupRows; r0 += kRows)
    tileMultiply(TileRows(a, lda, r0).rows, b, ldb, depth, width, c + r0 * ldc,
                 ldc, accumulate);
}

// n floats from src to dst, inline: a head's row is a few hundred bytes,
// which a memmove call per row took longer to copy (an eighth of
// attention's time at GPT-2 124M's 64-wide heads).
inline void copyRow(const float *src, int64_t n, float *dst) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Vec v;
    loadVec(v, src + i);
    storeVec(dst + i, v);
  }
  for (; i < n; ++i)
    dst[i] = src[i];
}

// dst = src * factor over n floats: one pass, where a copy and then an
// in-place scale reloaded the copy's narrower stores with wider loads, which
// the store buffer cannot forward (a tenth of the forward pass's time).
inline void scaleRow(const float *src, int64_t n, float factor, float *dst) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dst[i] = src[i] * factor;
}

// rows[d] becomes column d of the 8x8 block the rows held, in registers:
// three rounds of shuffles (interleave pairs of rows, then pairs of pairs,
// then the two halves).
void transpose8x8(Vec rows[8]) {
  static_assert(kLanes == 8, "an 8x8 block of kLanes-wide rows");
  Vec pairs[8], quads[8];
  for (int k = 0; k < 4; ++k) {
    pairs[2 * k] = __builtin_shufflevector(rows[2 * k], rows[2 * k + 1], 0, 8,
                                           1, 9, 4, 12, 5, 13);
    pairs[2 * k + 1] = __builtin_shufflevector(rows[2 * k], rows[2 * k + 1],
                                               2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int k = 0; k < 2; ++k)
    for (int half = 0; half < 2; ++half) {
      const Vec &a = pairs[4 * k + half], &b = pairs[4 * k + half + 2];
      quads[4 * k + 2 * half] =
          __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13);
      quads[4 * k + 2 * half + 1] =
          __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int d = 0; d < 4; ++d) {
    rows[d] = __builtin_shufflevector(quads[d], quads[d + 4], 0, 1, 2, 3, 8,
                                      9, 10, 11);
    rows[d + 4] = __builtin_shufflevector(quads[d], quads[d + 4], 4, 5, 6, 7,
                                          12, 13, 14, 15);
  }
}

// dst[d][j] = src row j, column d, for j < n: keys as columns. 8x8 blocks
// go through registers; a scalar loop writing columns strode through dst.
void packTransposed(const float *src, int64_t stride, int64_t n, int64_t D,
                    float *dst, int64_t ld) {
  int64_t j0 = 0;
  for (; j0 + 8 <= n; j0 += 8) {
    int64_t d0 = 0;
    for (; d0 + 8 <= D; d0 += 8) {
      Vec block[8];
      for (int r = 0; r < 8; ++r)
        loadVec(block[r], src + (j0 + r) * stride + d0);
      transpose8x8(block);
      for (int d = 0; d < 8; ++d)
        storeVec(dst + (d0 + d) * ld + j0, block[d]);
    }
    for (int64_t j = j0; j < j0 + 8; ++j)
      for (int64_t d = d0; d < D; ++d)
        dst[d * ld + j] = src[j * stride + d];
  }
  for (int64_t j = j0; j < n; ++j)
    for (int64_t d = 0; d < D; ++d)
      dst[d * ld + j] = src[j * stride + d];
}

// Copies n rows of D floats between strided layouts.
void copyRows(const float *src, int64_t srcStride, int64_t n, int64_t D,
              float *dst, int64_t dstStride) {
  for (int64_t j = 0; j < n; ++j)
    copyRow(src + j * srcStride, D, dst + j * dstStride);
}

void scaleRows(const float *src, int64_t srcStride, int64_t n, int64_t D,
               float factor, float *dst, int64_t dstStride) {
  for (int64_t j = 0; j < n; ++j)
    scaleRow(src + j * srcStride, D, factor, dst + j * dstStride);
}

// A group of kGroupRows consecutive queries starting at t0. Rows past the end
// of the sequence repeat the last query so that every row holds finite data;
// their results are dropped and their probabilities forced to zero.
struct QueryGroup {
  int64_t t0, count;
  int64_t row(int64_t r) const { return t0 + std::min(r, count - 1); }
  // Queries see keys up to their own position.
  int64_t lastKey() const { return t0 + count - 1; }
  // Keys of the block starting at j0 that some row sees: the products stop
  // at the group's last key, not the block's end (on the diagonal block of
  // a causal walk most of it), so at T = 64 the four groups of 16 queries
  // multiply 16, 32, 48 and 64 keys instead of 64 each.
  int64_t keysSeen(int64_t j0) const {
    return std::min(kKeyBlock, lastKey() + 1 - j0);
  }
  // Keys of the block [j0, j0+n) that row r may attend to.
  int64_t visible(int64_t r, int64_t j0, int64_t n) const {
    return r < count ? std::clamp<int64_t>(t0 + r + 1 - j0, 0, n) : 0;
  }
  // Copies the group's rows of one head of a [B,T,*] tensor (row stride
  // `stride`, starting at `head`) into a zero-padded [kGroupRows, ld] buffer.
  void gather(const float *head, int64_t stride, int64_t D, float *dst,
              int64_t ld) const {
    for (int64_t r = 0; r < kGroupRows; ++r)
      copyRow(head + row(r) * stride, D, dst + r * ld);
  }
};

// factors[j] = the dropout factor of probability (t, j0 + j) of head h of
// sequence b (attention_dropout.h), for j < kKeyBlock: one Philox block per
// four probabilities.
void rowFactors(const mrt::AttentionDropout &dropout, const Shape &s,
                int64_t b, int64_t h, int64_t t, int64_t j0, float *factors) {
  const uint64_t first = dropout.index(b, h, s.T, t, j0);
  uint32_t words[4];
  for (int64_t j = 0; j < kKeyBlock; ++j) {
    const uint64_t index = first + static_cast<uint64_t>(j);
    if (j == 0 || index % 4 == 0)
      mrt_dropout_block(dropout.seed, dropout.step, dropout.stream, index / 4,
                        words);
    factors[j] = words[index % 4] >= dropout.threshold ? dropout.scale : 0.0f;
  }
}

QueryGroup groupAt(const Shape &s, int64_t t0) {
  return {t0, std::min(kGroupRows, s.T - t0)};
}

// Running softmax of one query over the key blocks seen so far.
struct RunningSoftmax {
  float max = -INFINITY;
  float sum = 0.0f;
};

// The loops over a row of a key block run over the whole block and mask the
// columns past `visible`: with exactly kKeyBlock iterations they vectorise
// with no scalar remainder. The causal mask leaves `visible` anywhere in
// 1..kKeyBlock, and the remainders' scalar exps took most of the softmax's
// time. Columns past the products' width hold stale finite values; the
// selects drop them.

// Turns one row of raw dot products into the unnormalised probabilities
// exp(scale*dot - max) (zero past `visible`), folds them into the state, and
// returns the factor by which the values accumulated so far must shrink.
float foldScores(float *row, int64_t visible, float scale,
                 RunningSoftmax &state) {
  if (visible == 0) {
    std::fill(row, row + kKeyBlock, 0.0f);
    return 1.0f;
  }
  float blockMax = -INFINITY;
#pragma omp simd reduction(max : blockMax)
  for (int64_t j = 0; j < kKeyBlock; ++j)
    blockMax = j < visible && row[j] > blockMax ? row[j] : blockMax;
  float newMax = std::max(state.max, scale * blockMax);
  // Every exponent is at most 0: newMax bounds the block and the past.
  float blockSum = 0.0f;
#pragma omp simd reduction(+ : blockSum)
  for (int64_t j = 0; j < kKeyBlock; ++j) {
    float p = j < visible ? mrt::expNonPositive(scale * row[j] - newMax) : 0.0f;
    row[j] = p;
    blockSum += p;
  }
  // Nothing is accumulated before the first block (sum 0): no exp for it.
  float shrink =
      state.sum > 0.0f ? mrt::expNonPositive(state.max - newMax) : 0.0f;
  state.sum = state.sum * shrink + blockSum;
  state.max = newMax;
  return shrink;
}

struct ForwardScratch {
  explicit ForwardScratch(const Shape &s)
      : keysT(s.D * s.Tpad(), 0.0f), values(s.Tpad() * s.Dpad(), 0.0f),
        queries(kGroupRows * s.Dpad(), 0.0f), acc(kGroupRows * s.Dpad()),
        weights(kGroupRows * kKeyBlock), factors(kKeyBlock),
        states(kGroupRows) {}
  std::vector<float> keysT;   // [D, Tpad]
  std::vector<float> values;  // [Tpad, Dpad]
  std::vector<float> queries; // [kGroupRows, Dpad]
  std::vector<float> acc;     // [kGroupRows, Dpad]: weighted value sums
  std::vector<float> weights; // [kGroupRows, kKeyBlock]: scores, weights
  std::vector<float> factors; // [kKeyBlock]: one row's dropout factors
  std::vector<RunningSoftmax> states; // [kGroupRows]
};

// x rounded to bf16 and kept in fp32: products of such values summed in fp32
// are the GPU's bf16 tensor-core products.
void roundToBf16(float *x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    x[i] = mrt::widen(mrt::narrow(x[i]));
}

// Drops row r's weights of the block at j0 after the softmax has summed
// them: the normaliser and the log-sum-exp are those of all probabilities.
void dropWeights(const mrt::AttentionDropout &dropout, const Shape &s, int64_t b,
                 int64_t h, QueryGroup g, int64_t r, int64_t j0, float *row,
                 float *factors) {
  if (!dropout.enabled() || r >= g.count)
    return;
  rowFactors(dropout, s, b, h, g.t0 + r, j0, factors);
#pragma omp simd
  for (int64_t j = 0; j < kKeyBlock; ++j)
    row[j] *= factors[j];
}

void forwardGroup(const Heads<const float *> &in, float *out, float *headLse,
                  const Shape &s, const mrt::AttentionDropout &dropout,
                  bool bf16Products, int64_t b, int64_t h, QueryGroup g,
                  ForwardScratch &w) {
  const float scale = scoreScale(s);
  const int64_t Dpad = s.Dpad();
  g.gather(in.query(s, b, 0, h), in.ldq, s.D, w.queries.data(), Dpad);
  std::fill(w.states.begin(), w.states.end(), RunningSoftmax{});
  std::fill(w.acc.begin(), w.acc.end(), 0.0f);

  for (int64_t j0 = 0; j0 <= g.lastKey(); j0 += kKeyBlock) {
    int64_t n = g.keysSeen(j0);
    groupMultiply(w.queries.data(), Dpad, w.keysT.data() + j0, s.Tpad(), s.D,
                  roundUp(n, kLanes), w.weights.data(), kKeyBlock, false);
    for (int64_t r = 0; r < kGroupRows; ++r) {
      float *row = w.weights.data() + r * kKeyBlock;
      float shrink =
          foldScores(row, g.visible(r, j0, n), scale, w.states[r]);
      dropWeights(dropout, s, b, h, g, r, j0, row, w.factors.data());
      if (bf16Products)
        roundToBf16(row, kKeyBlock);
      if (j0 > 0) // the accumulators are still zero on the first block
        mrt::scale(w.acc.data() + r * Dpad, Dpad, shrink);
    }
    groupMultiply(w.weights.data(), kKeyBlock, w.values.data() + j0 * Dpad,
                  Dpad, n, Dpad, w.acc.data(), Dpad, true);
  }

  for (int64_t r = 0; r < g.count; ++r) {
    scaleRow(w.acc.data() + r * Dpad, s.D, 1.0f / w.states[r].sum,
             out + outOffset(s, b, g.t0 + r, h));
    headLse[g.t0 + r] = w.states[r].max + std::log(w.states[r].sum);
  }
}

MRT_VECTOR_KERNEL void forwardHead(const Heads<const float *> &in,
                                   float *out, float *lse, const Shape &s,
                                   const mrt::AttentionDropout &dropout,
                                   bool bf16Products, int64_t b, int64_t h,
                                   ForwardScratch &w) {
  const int64_t kv = h / s.group();
  packTransposed(in.key(s, b, 0, kv), in.ldkv, s.T, s.D, w.keysT.data(),
                 s.Tpad());
  copyRows(in.value(s, b, 0, kv), in.ldkv, s.T, s.D, w.values.data(),
           s.Dpad());
  for (int64_t t0 = 0; t0 < s.T; t0 += kGroupRows)
    forwardGroup(in, out, lse + (b * s.H + h) * s.T, s, dropout, bf16Products,
                 b, h, groupAt(s, t0), w);
}

struct BackwardScratch {
  explicit BackwardScratch(const Shape &s)
      : keysT(s.D * s.Tpad(), 0.0f), valuesT(s.D * s.Tpad(), 0.0f),
        keys(s.Tpad() * s.Dpad(), 0.0f), dkeys(s.Tpad() * s.Dpad()),
        dvalues(s.Tpad() * s.Dpad()), delta(s.T),
        queries(kGroupRows * s.Dpad(), 0.0f),
        douts(kGroupRows * s.Dpad(), 0.0f), dq(kGroupRows * s.Dpad()),
        probs(kGroupRows * kKeyBlock), dscores(kGroupRows * kKeyBlock),
        factors(kKeyBlock, 1.0f), transposed(kKeyBlock * kGroupRows) {}
  std::vector<float> keysT, valuesT; // [D, Tpad]
  std::vector<float> keys;           // [Tpad, Dpad]
  std::vector<float> dkeys, dvalues; // [Tpad, Dpad] accumulators
  std::vector<float> delta;          // [T]: dout[t] . out[t]
  std::vector<float> queries, douts; // [kGroupRows, Dpad]
  std::vector<float> dq;             // [kGroupRows, Dpad] accumulator
  std::vector<float> probs, dscores; // [kGroupRows, kKeyBlock]
  std::vector<float> factors;        // [kKeyBlock]: one row's dropout factors
  std::vector<float> transposed;     // [kKeyBlock, kGroupRows]
};

// For one key block, from the raw products q.k (in probs) and dout.v (in
// dscores): P = exp(scale*q.k - lse) recomputed from the forward's lse, the
// kept probabilities P * F (F the dropout factors, 1 without dropout) in
// probs, and the score gradient dS = P * (F * dout.v - delta) without the
// scores' scale, which dQ and dK take once summed: dS is then rounded for
// bf16 products where the GPU's kernels round it.
void probabilitiesAndScoreGrads(const Shape &s,
                                const mrt::AttentionDropout &dropout,
                                bool bf16Products, int64_t b, int64_t h,
                                QueryGroup g, int64_t j0, int64_t n,
                                const float *headLse, BackwardScratch &w) {
  const float scale = scoreScale(s);
  const float *f = w.factors.data();
  for (int64_t r = 0; r < kGroupRows; ++r) {
    float *p = w.probs.data() + r * kKeyBlock;
    float *ds = w.dscores.data() + r * kKeyBlock;
    int64_t visible = g.visible(r, j0, n);
    float lse = headLse[g.row(r)], delta = w.delta[g.row(r)];
    if (dropout.enabled() && visible > 0)
      rowFactors(dropout, s, b, h, g.t0 + r, j0, w.factors.data());
    // lse is at least the row's largest score: exponents at most 0.
#pragma omp simd
    for (int64_t j = 0; j < kKeyBlock; ++j) {
      bool seen = j < visible;
      float prob = seen ? mrt::expNonPositive(scale * p[j] - lse) : 0.0f;
      ds[j] = seen ? prob * (f[j] * ds[j] - delta) : 0.0f;
      p[j] = prob * f[j];
    }
    if (bf16Products) {
      roundToBf16(p, kKeyBlock);
      roundToBf16(ds, kKeyBlock);
    }
  }
}

// dacc[j][:] += sum_r coeffs[r][j] * x[r][:] over the group's rows, for the
// keys of one block: a product with the coefficients transposed.
void accumulatePerKey(const float *coeffs, const float *x, int64_t n,
                      float *dacc, const Shape &s, BackwardScratch &w) {
  for (int64_t r = 0; r < kGroupRows; ++r)
    for (int64_t j = 0; j < kKeyBlock; ++j)
      w.transposed[j * kGroupRows + r] = coeffs[r * kKeyBlock + j];
  for (int64_t j0 = 0; j0 < n; j0 += kRows)
    tileMultiply(TileRows(w.transposed.data(), kGroupRows, j0).rows, x,
                 s.Dpad(), kGroupRows, s.Dpad(), dacc + j0 * s.Dpad(), s.Dpad(),
                 true);
}

void backwardGroup(const Heads<const float *> &in, const float *dout,
                   const float *headLse, const Heads<float *> &grads,
                   const Shape &s, const mrt::AttentionDropout &dropout,
                   bool bf16Products, int64_t b, int64_t h, QueryGroup g,
                   BackwardScratch &w) {
  const int64_t Dpad = s.Dpad();
  g.gather(in.query(s, b, 0, h), in.ldq, s.D, w.queries.data(), Dpad);
  g.gather(dout + outOffset(s, b, 0, h), s.H * s.D, s.D, w.douts.data(), Dpad);
  std::fill(w.dq.begin(), w.dq.end(), 0.0f);

  for (int64_t j0 = 0; j0 <= g.lastKey(); j0 += kKeyBlock) {
    int64_t n = g.keysSeen(j0), width = roundUp(n, kLanes);
    groupMultiply(w.queries.data(), Dpad, w.keysT.data() + j0, s.Tpad(), s.D,
                  width, w.probs.data(), kKeyBlock, false);
    groupMultiply(w.douts.data(), Dpad, w.valuesT.data() + j0, s.Tpad(), s.D,
                  width, w.dscores.data(), kKeyBlock, false);
    probabilitiesAndScoreGrads(s, dropout, bf16Products, b, h, g, j0, n,
                               headLse, w);
    groupMultiply(w.dscores.data(), kKeyBlock, w.keys.data() + j0 * Dpad, Dpad,
                  n, Dpad, w.dq.data(), Dpad, true);
    accumulatePerKey(w.dscores.data(), w.queries.data(), n,
                     w.dkeys.data() + j0 * Dpad, s, w);
    accumulatePerKey(w.probs.data(), w.douts.data(), n,
                     w.dvalues.data() + j0 * Dpad, s, w);
  }

  scaleRows(w.dq.data(), Dpad, g.count, s.D, scoreScale(s),
            grads.query(s, b, g.t0, h), grads.ldq);
}

// With P the probabilities, F the dropout factors and dP = dout v^T, the
// score gradient is dS = P * (F * dP - delta), delta[t] = sum_j P[t,j]
// F[t,j] dP[t,j] = dout[t] . out[t].
// Query head h's share of its key/value head's gradients goes to head
// `kvOut` of `kvGrads`' k and v.
MRT_VECTOR_KERNEL void backwardHead(const Heads<const float *> &in,
                                    const float *out, const float *dout,
                                    const float *lse,
                                    const Heads<float *> &grads,
                                    const Heads<float *> &kvGrads,
                                    int64_t kvOut, const Shape &s,
                                    const mrt::AttentionDropout &dropout,
                                    bool bf16Products, int64_t b, int64_t h,
                                    BackwardScratch &w) {
  const int64_t kv = h / s.group();
  packTransposed(in.key(s, b, 0, kv), in.ldkv, s.T, s.D, w.keysT.data(),
                 s.Tpad());
  packTransposed(in.value(s, b, 0, kv), in.ldkv, s.T, s.D, w.valuesT.data(),
                 s.Tpad());
  copyRows(in.key(s, b, 0, kv), in.ldkv, s.T, s.D, w.keys.data(), s.Dpad());
  std::fill(w.dkeys.begin(), w.dkeys.end(), 0.0f);
  std::fill(w.dvalues.begin(), w.dvalues.end(), 0.0f);
  for (int64_t t = 0; t < s.T; ++t)
    w.delta[t] = mrt::dot(dout + outOffset(s, b, t, h),
                          out + outOffset(s, b, t, h), s.D);

  for (int64_t t0 = 0; t0 < s.T; t0 += kGroupRows)
    backwardGroup(in, dout, lse + (b * s.H + h) * s.T, grads, s, dropout,
                  bf16Products, b, h, groupAt(s, t0), w);

  scaleRows(w.dkeys.data(), s.Dpad(), s.T, s.D, scoreScale(s),
            kvGrads.key(s, b, 0, kvOut), kvGrads.ldkv);
  copyRows(w.dvalues.data(), s.Dpad(), s.T, s.D,
           kvGrads.value(s, b, 0, kvOut), kvGrads.ldkv);
}

// dk (or dv) of each key/value head: the sum of its query heads' shares,
// [B,T,H,D] in `shares`, in head order.
void sumGroups(const float *shares, const Shape &s, float *grad,
               int64_t ldkv) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bt = 0; bt < s.B * s.T; ++bt)
    for (int64_t g = 0; g < s.KV; ++g) {
      float *dst = grad + bt * ldkv + g * s.D;
      const float *first = shares + (bt * s.H + g * s.group()) * s.D;
      std::copy_n(first, s.D, dst);
      for (int64_t i = 1; i < s.group(); ++i)
        for (int64_t d = 0; d < s.D; ++d)
          dst[d] += first[i * s.D + d];
    }
}

void checkGroups(const Shape &s) {
  if (s.KV < 1 || s.H % s.KV != 0)
    mrt::fatal("attention: %lld key/value heads do not divide %lld query "
               "heads",
               static_cast<long long>(s.KV), static_cast<long long>(s.H));
}

/// The forward pass on fp32 operands. With bf16Products the probabilities
/// (kept ones, after dropout) are rounded to bf16 before they multiply the
/// values, as the CUDA kernels' tensor-core products take them; their sums
/// (the normaliser, the log-sum-exp) stay those of the fp32 values.
void attentionForward(const Heads<const float *> &in, float *out, float *lse,
                      const Shape &s, const mrt::AttentionDropout &drop,
                      bool bf16Products) {
  checkGroups(s);
#pragma omp parallel
  {
    ForwardScratch scratch(s);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.H; ++h)
        forwardHead(in, out, lse, s, drop, bf16Products, b, h, scratch);
  }
}

/// The backward pass on fp32 operands. With bf16Products the recomputed
/// probabilities and the score gradients are rounded to bf16 before their
/// products (dV = P^T dO; dQ = dS K, dK = dS^T Q), as on the GPU.
void attentionBackward(const Heads<const float *> &in, const float *out,
                       const float *dout, const float *lse,
                       const Heads<float *> &grads, const Shape &s,
                       const mrt::AttentionDropout &drop, bool bf16Products) {
  checkGroups(s);
  // Multi-head attention writes each head's dk and dv where they belong;
  // grouped heads write their shares [B,T,H,D] apart, summed after.
  const bool grouped = s.group() > 1;
  std::vector<float> dkShares(grouped ? s.B * s.T * s.H * s.D : 0),
      dvShares(dkShares.size());
  const Heads<float *> shares{nullptr, dkShares.data(), dvShares.data(), 0,
                              s.H * s.D};
#pragma omp parallel
  {
    BackwardScratch scratch(s);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.H; ++h)
        backwardHead(in, out, dout, lse, grads, grouped ? shares : grads,
                     grouped ? h : h / s.group(), s, drop, bf16Products, b, h,
                     scratch);
  }
  if (grouped) {
    sumGroups(dkShares.data(), s, grads.k, grads.ldkv);
    sumGroups(dvShares.data(), s, grads.v, grads.ldkv);
  }
}

} // namespace

extern "C" void mrt_attention_fwd_f32(const float *q, const float *k,
                                      const float *v, int64_t ldq,
                                      int64_t ldkv, float *out, float *lse,
                                      int64_t B, int64_t T, int64_t H,
                                      int64_t KV, int64_t D, float dropout,
                                      int64_t seed, int64_t step,
                                      int64_t stream, int64_t batch_offset,
                                      int64_t head_offset,
                                      int64_t global_heads) {
  const Shape s{B, T, H, KV, D};
  attentionForward({q, k, v, ldq, ldkv}, out, lse, s,
                   mrt::attentionDropout(dropout, seed, step, stream, batch_offset,
                                        head_offset, H, global_heads),
                   false);
}

extern "C" void mrt_attention_bwd_f32(const float *q, const float *k,
                                      const float *v, int64_t ldq,
                                      int64_t ldkv, const float *out,
                                      const float *dout, const float *lse,
                                      float *dq, float *dk, float *dv,
                                      int64_t B, int64_t T, int64_t H,
                                      int64_t KV, int64_t D, float dropout,
                                      int64_t seed, int64_t step,
                                      int64_t stream, int64_t batch_offset,
                                      int64_t head_offset,
                                      int64_t global_heads) {
  const Shape s{B, T, H, KV, D};
  attentionBackward({q, k, v, ldq, ldkv}, out, dout, lse,
                    {dq, dk, dv, ldq, ldkv}, s,
                    mrt::attentionDropout(dropout, seed, step, stream, batch_offset,
                                        head_offset, H, global_heads),
                    false);
}

// bf16 storage: fp32 copies of the heads (compact, row stride H*D or KV*D),
// the products' probability operands rounded as on the GPU, the results
// rounded once into the bf16 outputs.
extern "C" void mrt_attention_fwd_bf16(const mrt_bf16 *q, const mrt_bf16 *k,
                                       const mrt_bf16 *v, int64_t ldq,
                                       int64_t ldkv, mrt_bf16 *out,
                                       float *lse, int64_t B, int64_t T,
                                       int64_t H, int64_t KV, int64_t D,
                                       float dropout, int64_t seed,
                                       int64_t step, int64_t stream,
                                       int64_t batch_offset,
                                       int64_t head_offset,
                                       int64_t global_heads) {
  const Shape s{B, T, H, KV, D};
  const int64_t rows = B * T;
  mrt::WidenedRows qs(q, rows, H * D, ldq), ks(k, rows, KV * D, ldkv),
      vs(v, rows, KV * D, ldkv);
  mrt::Narrowed outs(out, rows * H * D);
  attentionForward({qs.data(), ks.data(), vs.data(), H * D, KV * D},
                   outs.data(), lse, s,
                   mrt::attentionDropout(dropout, seed, step, stream, batch_offset,
                                        head_offset, H, global_heads),
                   true);
}

extern "C" void mrt_attention_bwd_bf16(const mrt_bf16 *q, const mrt_bf16 *k,
                                       const mrt_bf16 *v, int64_t ldq,
                                       int64_t ldkv, const mrt_bf16 *out,
                                       const mrt_bf16 *dout, const float *lse,
                                       mrt_bf16 *dq, mrt_bf16 *dk,
                                       mrt_bf16 *dv, int64_t B, int64_t T,
                                       int64_t H, int64_t KV, int64_t D,
                                       float dropout, int64_t seed,
                                       int64_t step, int64_t stream,
                                       int64_t batch_offset,
                                       int64_t head_offset,
                                       int64_t global_heads) {
  const Shape s{B, T, H, KV, D};
  const int64_t rows = B * T;
  mrt::WidenedRows qs(q, rows, H * D, ldq), ks(k, rows, KV * D, ldkv),
      vs(v, rows, KV * D, ldkv);
  mrt::Widened outs(out, rows * H * D), douts(dout, rows * H * D);
  mrt::Scratch<float> dqs(rows * H * D), dks(rows * KV * D),
      dvs(rows * KV * D);
  attentionBackward({qs.data(), ks.data(), vs.data(), H * D, KV * D},
                    outs.data(), douts.data(), lse,
                    {dqs.data(), dks.data(), dvs.data(), H * D, KV * D}, s,
                    mrt::attentionDropout(dropout, seed, step, stream, batch_offset,
                                        head_offset, H, global_heads),
                    true);
  mrt::narrowRows(dqs.data(), rows, H * D, dq, ldq);
  mrt::narrowRows(dks.data(), rows, KV * D, dk, ldkv);
  mrt::narrowRows(dvs.data(), rows, KV * D, dv, ldkv);
}
