#include "megatron_rt/gelu.h"

#include "column_sums.h"

#include <cmath>

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

inline float gelu(float x) {
  float t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5f * x * (1.0f + t);
}

// d/dx of 0.5 x (1 + tanh(u(x))) = 0.5 (1 + t) + 0.5 x (1 - t^2) u'(x).
inline float geluGrad(float x) {
  float t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

} // namespace

extern "C" void mrt_gelu_fwd_f32(const float *x, float *y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = gelu(x[i]);
}

extern "C" void mrt_gelu_bwd_f32(const float *x, const float *dy, float *dx,
                                 int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    dx[i] = dy[i] * geluGrad(x[i]);
}

extern "C" void mrt_bias_gelu_fwd_f32(const float *x, const float *bias,
                                      float *y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = gelu(x[r * cols + c] + bias[c]);
}

extern "C" void mrt_bias_gelu_bwd_f32(const float *x, const float *bias,
                                      const float *dy, float *dx, float *dbias,
                                      int64_t rows, int64_t cols) {
  mrt::ColumnSums sums(1, cols);
#pragma omp parallel
  {
    double *dbiasLocal = sums.local(0);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        int64_t i = r * cols + c;
        float grad = dy[i] * geluGrad(x[i] + bias[c]);
        dx[i] = grad;
        dbiasLocal[c] += grad;
      }
    }
  }
  for (int64_t c = 0; c < cols; ++c)
    dbias[c] += static_cast<float>(sums.total(0, c));
}
