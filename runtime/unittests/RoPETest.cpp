#include "megatron_rt/rope.h"

#include "TestUtil.h"

#include <complex>

using namespace mrt_test;

namespace {

constexpr int64_t B = 2, T = 5, H = 3, D = 8;
constexpr double kTheta = 10000.0;

// Rotary embedding as a complex product, independently of the kernel's
// pairing: element i and i + D/2 of a head are the real and imaginary parts
// of z_i, and the embedding is z_i * exp(j p theta^(-2i/D)).
std::vector<double> reference(const std::vector<float> &x,
                              const std::vector<int32_t> &positions,
                              int direction) {
  std::vector<double> y(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < D / 2; ++i) {
          int64_t at = ((b * T + t) * H + h) * D + i;
          std::complex<double> z(x[at], x[at + D / 2]);
          double angle = direction * double(positions[b] + t) *
                         std::pow(kTheta, -2.0 * i / D);
          z *= std::polar(1.0, angle);
          y[at] = z.real();
          y[at + D / 2] = z.imag();
        }
  return y;
}

class RoPETest : public ::testing::Test {
protected:
  std::vector<float> x = randomVector(B * T * H * D, 41);
  // Generation's per-sequence starts: one sequence far into its context.
  std::vector<int32_t> positions = {0, 1000};
};

TEST_F(RoPETest, RotatesEachPairByItsPositionsAngle) {
  std::vector<float> y(x.size());
  mrt_rope_f32(x.data(), positions.data(), y.data(), B, T, H, D, kTheta, 1);
  EXPECT_TRUE(allClose(y, reference(x, positions, 1)));
}

TEST_F(RoPETest, InverseUndoesTheRotation) {
  std::vector<float> y(x.size()), back(x.size());
  mrt_rope_f32(x.data(), positions.data(), y.data(), B, T, H, D, kTheta, -1);
  EXPECT_TRUE(allClose(y, reference(x, positions, -1)));
  mrt_rope_f32(y.data(), positions.data(), back.data(), B, T, H, D, kTheta,
               1);
  EXPECT_TRUE(allClose(back, toDouble(x)));
}

TEST_F(RoPETest, InPlace) {
  std::vector<float> y = x;
  mrt_rope_f32(y.data(), positions.data(), y.data(), B, T, H, D, kTheta, 1);
  EXPECT_TRUE(allClose(y, reference(x, positions, 1)));
}

// Position 0 is the identity: the first token of a training sequence.
TEST_F(RoPETest, PositionZeroIsTheIdentity) {
  std::vector<int32_t> zeros = {0, 0};
  std::vector<float> y(x.size());
  mrt_rope_f32(x.data(), zeros.data(), y.data(), B, 1, H, D, kTheta, 1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < H * D; ++c)
      EXPECT_EQ(y[b * H * D + c], x[b * H * D + c]);
}

} // namespace
