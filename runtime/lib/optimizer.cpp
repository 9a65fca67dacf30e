#include "megatron_rt/optimizer.h"

#include <cmath>

namespace {

// torch.lerp's formula: the branch keeps the result exact at weight 0 and 1.
inline float lerp(float from, float to, float weight) {
  return weight < 0.5f ? from + weight * (to - from)
                       : to - (to - from) * (1.0f - weight);
}

} // namespace

// Follows torch.optim.AdamW's single-tensor path operation by operation:
// scalar factors are formed in double (Python floats) and rounded to fp32
// once, as PyTorch does when it applies them to fp32 tensors.
extern "C" void mrt_adamw_f32(float *p, const float *g, float *m, float *v,
                              int64_t n, double lr, double beta1, double beta2,
                              double eps, double weight_decay, int64_t step) {
  const float decay = static_cast<float>(1.0 - lr * weight_decay);
  const float mWeight = static_cast<float>(1.0 - beta1);
  const float vDecay = static_cast<float>(beta2);
  const float vWeight = static_cast<float>(1.0 - beta2);
  const double biasCorrection1 = 1.0 - std::pow(beta1, step);
  const double biasCorrection2 = 1.0 - std::pow(beta2, step);
  const float negStepSize = static_cast<float>(-(lr / biasCorrection1));
  const float biasCorrection2Sqrt =
      static_cast<float>(std::sqrt(biasCorrection2));
  const float epsF = static_cast<float>(eps);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= decay;
    m[i] = lerp(m[i], g[i], mWeight);
    v[i] = v[i] * vDecay + vWeight * g[i] * g[i];
    float denom = std::sqrt(v[i]) / biasCorrection2Sqrt + epsF;
    p[i] += negStepSize * m[i] / denom;
  }
}

extern "C" void mrt_sum_squares_f32(const float *x, int64_t n, double *sums,
                                    int64_t slot) {
  double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(x[i]) * x[i];
  sums[slot] = sum;
}

extern "C" double mrt_sum_f64(const double *values, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum += values[i];
  return sum;
}

extern "C" void mrt_scale_f32(float *x, int64_t n, float s) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    x[i] *= s;
}
