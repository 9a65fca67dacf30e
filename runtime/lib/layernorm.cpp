#include "megatron_rt/layernorm.h"

#include "column_sums.h"
#include "isa.h"
#include "vec.h"

#include <cmath>

namespace {

struct RowStats {
  float mean;
  float rstd;
};

// Two passes (mean, then squared deviations) stay accurate when |mean| is
// large compared with the spread, unlike E[x^2] - E[x]^2.
RowStats rowStats(const float *x, int64_t cols, float eps) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c)
    sum += x[c];
  float mean = sum / cols;
  float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
  for (int64_t c = 0; c < cols; ++c)
    sq += (x[c] - mean) * (x[c] - mean);
  return {mean, 1.0f / std::sqrt(sq / cols + eps)};
}

void accumulateParamGrads(const float *dy, const float *x, RowStats s,
                          double *dw, double *db, int64_t cols) {
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) {
    dw[c] += dy[c] * ((x[c] - s.mean) * s.rstd);
    db[c] += dy[c];
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w: the
// two means are the gradient flowing through mean and rstd.
void inputGradRow(const float *dy, const float *x, const float *w, RowStats s,
                  float *dx, int64_t cols) {
  float sumG = 0.0f, sumGXhat = 0.0f;
#pragma omp simd reduction(+ : sumG, sumGXhat)
  for (int64_t c = 0; c < cols; ++c) {
    float g = dy[c] * w[c];
    sumG += g;
    sumGXhat += g * ((x[c] - s.mean) * s.rstd);
  }
  float meanG = sumG / cols, meanGXhat = sumGXhat / cols;
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) {
    float xhat = (x[c] - s.mean) * s.rstd;
    dx[c] = s.rstd * (dy[c] * w[c] - meanG - xhat * meanGXhat);
  }
}

/// y = (x - mean) * rstd * w + b over one row, after its statistics are
/// stored. y may alias x.
void normalizeRow(const float *x, const float *w, const float *b, float *y,
                  int64_t cols, float eps, float &mean, float &rstd) {
  RowStats s = rowStats(x, cols, eps);
  mean = s.mean;
  rstd = s.rstd;
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c)
    y[c] = (x[c] - s.mean) * s.rstd * w[c] + b[c];
}

} // namespace

extern "C" MRT_VECTOR_KERNEL void
mrt_layernorm_fwd_f32(const float *x, const float *w, const float *b, float *y,
                      float *mean, float *rstd, int64_t rows, int64_t cols,
                      float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    normalizeRow(x + r * cols, w, b, y + r * cols, cols, eps, mean[r], rstd[r]);
}

extern "C" MRT_VECTOR_KERNEL void mrt_residual_layernorm_fwd_f32(
    const float *x, const float *delta, const float *delta_bias, float *sum,
    const float *w, const float *b, float *y, float *mean, float *rstd,
    int64_t rows, int64_t cols, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols, *dr = delta + r * cols;
    float *sr = sum + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c)
      sr[c] = xr[c] + (dr[c] + delta_bias[c]);
    normalizeRow(sr, w, b, y + r * cols, cols, eps, mean[r], rstd[r]);
  }
}

extern "C" MRT_VECTOR_KERNEL void
mrt_layernorm_stats_f32(const float *x, float *mean, float *rstd, int64_t rows,
                        int64_t cols, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    RowStats s = rowStats(x + r * cols, cols, eps);
    mean[r] = s.mean;
    rstd[r] = s.rstd;
  }
}

extern "C" MRT_VECTOR_KERNEL void
mrt_layernorm_bwd_f32(const float *dy, const float *x, const float *w,
                      const float *mean, const float *rstd, float *dx,
                      float *dw, float *db, int64_t rows, int64_t cols) {
  enum { DW, DB };
  mrt::ColumnSums sums(2, cols);
#pragma omp parallel
  {
    double *dwLocal = sums.local(DW), *dbLocal = sums.local(DB);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      RowStats s{mean[r], rstd[r]};
      const float *dyr = dy + r * cols, *xr = x + r * cols;
      // Before the input gradient, which may overwrite dy in place.
      accumulateParamGrads(dyr, xr, s, dwLocal, dbLocal, cols);
      inputGradRow(dyr, xr, w, s, dx + r * cols, cols);
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    dw[c] = static_cast<float>(sums.total(DW, c));
    db[c] = static_cast<float>(sums.total(DB, c));
  }
}
