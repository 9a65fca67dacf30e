#include "megatron_rt/layernorm.h"

#include "column_sums.h"
#include "isa.h"
#include "vec.h"

#include <cmath>

// Layer norm and RMS norm are one computation: RMS norm is layer norm with
// the mean taken as zero and no bias. Every function below takes the norm
// as a template argument, so the two share each formula.

namespace {

enum class Norm { Layer, RMS };

struct RowStats {
  float mean;
  float rstd;
};

// Two passes (mean, then squared deviations) stay accurate when |mean| is
// large compared with the spread, unlike E[x^2] - E[x]^2. RMS norm's mean is
// zero by definition.
template <Norm kNorm>
RowStats rowStats(const float *x, int64_t cols, float eps) {
  float mean = 0.0f;
  if constexpr (kNorm == Norm::Layer) {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c)
      sum += x[c];
    mean = sum / cols;
  }
  float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
  for (int64_t c = 0; c < cols; ++c)
    sq += (x[c] - mean) * (x[c] - mean);
  return {mean, 1.0f / std::sqrt(sq / cols + eps)};
}

// dw += dy * xhat (and, for layer norm, db += dy).
template <Norm kNorm>
void accumulateParamGrads(const float *dy, const float *x, RowStats s,
                          double *dw, double *db, int64_t cols) {
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) {
    dw[c] += dy[c] * ((x[c] - s.mean) * s.rstd);
    if constexpr (kNorm == Norm::Layer)
      db[c] += dy[c];
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w: the
// two means are the gradient flowing through mean and rstd (RMS norm has no
// mean, so no mean(g)).
template <Norm kNorm>
void inputGradRow(const float *dy, const float *x, const float *w, RowStats s,
                  float *dx, int64_t cols) {
  float sumG = 0.0f, sumGXhat = 0.0f;
#pragma omp simd reduction(+ : sumG, sumGXhat)
  for (int64_t c = 0; c < cols; ++c) {
    float g = dy[c] * w[c];
    sumG += g;
    sumGXhat += g * ((x[c] - s.mean) * s.rstd);
  }
  float meanG = kNorm == Norm::Layer ? sumG / cols : 0.0f;
  float meanGXhat = sumGXhat / cols;
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) {
    float xhat = (x[c] - s.mean) * s.rstd;
    dx[c] = s.rstd * (dy[c] * w[c] - meanG - xhat * meanGXhat);
  }
}

/// y = (x - mean) * rstd * w (+ b) over one row, after its statistics are
/// stored. y may alias x.
template <Norm kNorm>
void normalizeRow(const float *x, const float *w, const float *b, float *y,
                  int64_t cols, float eps, float *mean, float &rstd) {
  RowStats s = rowStats<kNorm>(x, cols, eps);
  if constexpr (kNorm == Norm::Layer)
    *mean = s.mean;
  rstd = s.rstd;
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) {
    if constexpr (kNorm == Norm::Layer)
      y[c] = (x[c] - s.mean) * s.rstd * w[c] + b[c];
    else
      y[c] = x[c] * s.rstd * w[c];
  }
}

// The drivers take the norm as an argument rather than a template one: a
// vector kernel's OpenMP region is cloned with it (isa.h), and a template's
// would be outlined once at the baseline. The per-row work is the
// templates', inlined into each copy.

MRT_VECTOR_KERNEL void forward(Norm norm, const float *x, const float *w,
                               const float *b, float *y, float *mean,
                               float *rstd, int64_t rows, int64_t cols,
                               float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    if (norm == Norm::Layer)
      normalizeRow<Norm::Layer>(x + r * cols, w, b, y + r * cols, cols, eps,
                                mean + r, rstd[r]);
    else
      normalizeRow<Norm::RMS>(x + r * cols, w, b, y + r * cols, cols, eps,
                              nullptr, rstd[r]);
  }
}

// sum = x + (delta + delta_bias) (x + delta without a bias), then its norm.
MRT_VECTOR_KERNEL void residualForward(Norm norm, const float *x,
                                       const float *delta,
                                       const float *delta_bias, float *sum,
                                       const float *w, const float *b,
                                       float *y, float *mean, float *rstd,
                                       int64_t rows, int64_t cols, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols, *dr = delta + r * cols;
    float *sr = sum + r * cols;
    if (norm == Norm::Layer) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c)
        sr[c] = xr[c] + (dr[c] + delta_bias[c]);
      normalizeRow<Norm::Layer>(sr, w, b, y + r * cols, cols, eps, mean + r,
                                rstd[r]);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c)
        sr[c] = xr[c] + dr[c];
      normalizeRow<Norm::RMS>(sr, w, b, y + r * cols, cols, eps, nullptr,
                              rstd[r]);
    }
  }
}

MRT_VECTOR_KERNEL void stats(Norm norm, const float *x, float *mean,
                             float *rstd, int64_t rows, int64_t cols,
                             float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    if (norm == Norm::Layer) {
      RowStats s = rowStats<Norm::Layer>(x + r * cols, cols, eps);
      mean[r] = s.mean;
      rstd[r] = s.rstd;
    } else {
      rstd[r] = rowStats<Norm::RMS>(x + r * cols, cols, eps).rstd;
    }
  }
}

MRT_VECTOR_KERNEL void backward(Norm norm, const float *dy, const float *x,
                                const float *w, const float *mean,
                                const float *rstd, float *dx, float *dw,
                                float *db, int64_t rows, int64_t cols) {
  enum { DW, DB };
  const bool layer = norm == Norm::Layer;
  mrt::ColumnSums sums(layer ? 2 : 1, cols);
#pragma omp parallel
  {
    double *dwLocal = sums.local(DW);
    double *dbLocal = layer ? sums.local(DB) : nullptr;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float *dyr = dy + r * cols, *xr = x + r * cols;
      // The parameter gradients before the input gradient, which may
      // overwrite dy in place.
      if (layer) {
        RowStats s{mean[r], rstd[r]};
        accumulateParamGrads<Norm::Layer>(dyr, xr, s, dwLocal, dbLocal, cols);
        inputGradRow<Norm::Layer>(dyr, xr, w, s, dx + r * cols, cols);
      } else {
        RowStats s{0.0f, rstd[r]};
        accumulateParamGrads<Norm::RMS>(dyr, xr, s, dwLocal, dbLocal, cols);
        inputGradRow<Norm::RMS>(dyr, xr, w, s, dx + r * cols, cols);
      }
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    dw[c] = static_cast<float>(sums.total(DW, c));
    if (layer)
      db[c] = static_cast<float>(sums.total(DB, c));
  }
}

} // namespace

extern "C" void
mrt_layernorm_fwd_f32(const float *x, const float *w, const float *b, float *y,
                      float *mean, float *rstd, int64_t rows, int64_t cols,
                      float eps) {
  forward(Norm::Layer, x, w, b, y, mean, rstd, rows, cols, eps);
}

extern "C" void mrt_residual_layernorm_fwd_f32(
    const float *x, const float *delta, const float *delta_bias, float *sum,
    const float *w, const float *b, float *y, float *mean, float *rstd,
    int64_t rows, int64_t cols, float eps) {
  residualForward(Norm::Layer, x, delta, delta_bias, sum, w, b, y, mean, rstd,
                               rows, cols, eps);
}

extern "C" void
mrt_layernorm_stats_f32(const float *x, float *mean, float *rstd, int64_t rows,
                        int64_t cols, float eps) {
  stats(Norm::Layer, x, mean, rstd, rows, cols, eps);
}

extern "C" void
mrt_layernorm_bwd_f32(const float *dy, const float *x, const float *w,
                      const float *mean, const float *rstd, float *dx,
                      float *dw, float *db, int64_t rows, int64_t cols) {
  backward(Norm::Layer, dy, x, w, mean, rstd, dx, dw, db, rows, cols);
}

extern "C" void
mrt_rmsnorm_fwd_f32(const float *x, const float *w, float *y, float *rstd,
                    int64_t rows, int64_t cols, float eps) {
  forward(Norm::RMS, x, w, nullptr, y, nullptr, rstd, rows, cols, eps);
}

extern "C" void
mrt_residual_rmsnorm_fwd_f32(const float *x, const float *delta, float *sum,
                             const float *w, float *y, float *rstd,
                             int64_t rows, int64_t cols, float eps) {
  residualForward(Norm::RMS, x, delta, nullptr, sum, w, nullptr, y, nullptr,
                             rstd, rows, cols, eps);
}

extern "C" void mrt_rmsnorm_stats_f32(const float *x,
                                                        float *rstd,
                                                        int64_t rows,
                                                        int64_t cols,
                                                        float eps) {
  stats(Norm::RMS, x, nullptr, rstd, rows, cols, eps);
}

extern "C" void
mrt_rmsnorm_bwd_f32(const float *dy, const float *x, const float *w,
                    const float *rstd, float *dx, float *dw, int64_t rows,
                    int64_t cols) {
  backward(Norm::RMS, dy, x, w, nullptr, rstd, dx, dw, nullptr, rows, cols);
}
