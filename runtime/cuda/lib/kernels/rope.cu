#include "megatron_rt/rope.h"

#include "../cuda_check.h"
#include "common.cuh"

// One thread per rotated pair (element i and i + D/2 of a head): the
// rotation is memory-bound, and its angle, computed in double as on the
// CPU, costs a few double operations per pair.

namespace {

using mrt::cuda::asBf16;
using mrt::cuda::fromFloat;
using mrt::cuda::toFloat;

template <typename T> struct RotatePair {
  const T *x;
  const int32_t *positions;
  T *y;
  int64_t T_, H, half;
  double theta, direction;
  // Pairs [first, first + kVec), one at a time: the launcher asks for
  // kVec = 1, and elements of a pair lie D/2 apart, never in one group.
  template <int kVec> __device__ void apply(int64_t first) const {
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      rotate(first + k);
  }
  __device__ void rotate(int64_t pair) const {
    const int64_t i = pair % half, rest = pair / half;
    const int64_t token = rest / H, b = token / T_, t = token % T_;
    const double angle = static_cast<double>(positions[b] + t) *
                         pow(theta, -2.0 * static_cast<double>(i) /
                                        static_cast<double>(2 * half)) *
                         direction;
    double sine, cosine;
    sincos(angle, &sine, &cosine);
    const float c = static_cast<float>(cosine), s = static_cast<float>(sine);
    // Head `rest` starts at rest * D; y may alias x: both elements are read
    // before either is written.
    const int64_t at = rest * 2 * half + i;
    const float x1 = toFloat(x[at]), x2 = toFloat(x[at + half]);
    y[at] = fromFloat<T>(x1 * c - x2 * s);
    y[at + half] = fromFloat<T>(x2 * c + x1 * s);
  }
};

template <typename T>
void rope(const T *x, const int32_t *positions, T *y, int64_t B, int64_t T_,
          int64_t H, int64_t D, double theta, int64_t direction) {
  const int64_t half = D / 2;
  mrt::cuda::launchElementwise(
      B * T_ * H * half,
      RotatePair<T>{x, positions, y, T_, H, half, theta,
                    static_cast<double>(direction)},
      /*vec4=*/false);
}

} // namespace

extern "C" void mrt_rope_f32(const float *x, const int32_t *positions,
                             float *y, int64_t B, int64_t T, int64_t H,
                             int64_t D, double theta, int64_t direction) {
  rope(x, positions, y, B, T, H, D, theta, direction);
}

extern "C" void mrt_rope_bf16(const mrt_bf16 *x, const int32_t *positions,
                              mrt_bf16 *y, int64_t B, int64_t T, int64_t H,
                              int64_t D, double theta, int64_t direction) {
  rope(asBf16(x), positions, asBf16(y), B, T, H, D, theta, direction);
}
