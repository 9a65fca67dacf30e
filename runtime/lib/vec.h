// Internal: small vector loops shared by the kernels. `omp simd` lets the
// compiler reorder the float reductions (vectorise) without -ffast-math.
#ifndef MEGATRON_RT_LIB_VEC_H
#define MEGATRON_RT_LIB_VEC_H

#include <cmath>
#include <cstdint>

namespace mrt {

inline float dot(const float *a, const float *b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
}

// y += a * x
inline void axpy(float a, const float *x, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] += a * x[i];
}

inline void scale(float *x, int64_t n, float s) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    x[i] *= s;
}

inline float maxOf(const float *x, int64_t n) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i)
    m = x[i] > m ? x[i] : m;
  return m;
}

/// exp(x) for x <= 0 (a logit minus its row's maximum), as a polynomial
/// that `omp simd` loops vectorise: libm's expf is a call per element, and
/// the cross-entropy evaluates it for every vocabulary column of every token.
/// Cephes' expf: x = n ln2 + r with |r| <= ln2/2, a degree-7 polynomial for
/// e^r, 2^n by the exponent bits; relative error below 2e-7. Inputs below
/// -87 (e^x under FLT_MIN) give 0, NaN gives NaN (a row of a diverged
/// step).
inline float expNonPositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  // Selects, a floor and one conversion, no branch: the loop vectorises.
  // The argument of the integer conversion stays in range, NaN included
  // (converting NaN or a huge float to int is undefined).
  float clamped = x >= -87.0f && x <= 88.0f ? x : (x > 88.0f ? 88.0f : -87.0f);
  // floor, not a truncating int conversion and a fix-up: in the x86-64-v3
  // copies of the kernels (isa.h) it is one vector instruction (GCC 12 left
  // the conversion's form scalar there); the SSE2 baseline has no vector
  // floor, and there the loop stays scalar.
  float n = __builtin_floorf(clamped * kLog2e + 0.5f);
  float r = clamped - n * kLn2Hi - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float er = p * r * r + r + 1.0f;
  float twoN = __builtin_bit_cast(float, (static_cast<int32_t>(n) + 127) << 23);
  return x < -87.0f ? 0.0f : (x == x ? er * twoN : x);
}

/// tanh(x) = sign(x) (1 - e^-2|x|) / (1 + e^-2|x|), through expNonPositive:
/// branch-free, so `omp simd` loops vectorise it, where libm's tanhf is a
/// call per element (GELU's was 5 % of the 124M training step). The absolute
/// error stays below 3e-7, which is what GELU's 0.5 x (1 + tanh) sees; the
/// relative error grows as |x| falls below 1e-3. NaN gives NaN.
inline float tanhOf(float x) {
  float e = expNonPositive(-2.0f * std::fabs(x));
  return std::copysign((1.0f - e) / (1.0f + e), x);
}

} // namespace mrt

#endif // MEGATRON_RT_LIB_VEC_H
