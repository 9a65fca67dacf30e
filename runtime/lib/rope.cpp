#include "megatron_rt/rope.h"

#include "isa.h"

#include <cmath>
#include <vector>

// The angles of one position are computed once per token and shared by its
// heads: D/2 sin/cos pairs in double, rounded to float for the rotation.

namespace {

/// cos and sin of p * theta^(-2i/D) for i < D/2, times direction.
void angles(int64_t position, int64_t D, double theta, int64_t direction,
            float *cos, float *sin) {
  for (int64_t i = 0; i < D / 2; ++i) {
    double angle = static_cast<double>(position) *
                   std::pow(theta,
                            -2.0 * static_cast<double>(i) / D) *
                   static_cast<double>(direction);
    cos[i] = static_cast<float>(std::cos(angle));
    sin[i] = static_cast<float>(std::sin(angle));
  }
}

/// One token's H heads, x to y (which may alias x: each pair is read before
/// it is written).
void rotateToken(const float *x, float *y, int64_t H, int64_t D,
                 const float *cos, const float *sin) {
  const int64_t half = D / 2;
  for (int64_t h = 0; h < H; ++h) {
    const float *xh = x + h * D;
    float *yh = y + h * D;
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      float x1 = xh[i], x2 = xh[i + half];
      yh[i] = x1 * cos[i] - x2 * sin[i];
      yh[i + half] = x2 * cos[i] + x1 * sin[i];
    }
  }
}

} // namespace

extern "C" MRT_VECTOR_KERNEL void mrt_rope_f32(const float *x, const int32_t *positions,
                             float *y, int64_t B, int64_t T, int64_t H,
                             int64_t D, double theta, int64_t direction) {
#pragma omp parallel
  {
    std::vector<float> cos(D / 2), sin(D / 2);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        angles(positions[b] + t, D, theta, direction, cos.data(), sin.data());
        const int64_t offset = (b * T + t) * H * D;
        rotateToken(x + offset, y + offset, H, D, cos.data(), sin.data());
      }
  }
}
