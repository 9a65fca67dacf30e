// The CPU runtime's _bf16 entry points that are their f32 siblings on
// widened copies (bf16.h); the GEMMs, attention, the cross-entropy and the
// embedding have their own.
#include "bf16.h"
#include "context_mesh.h"
#include "isa.h"

#include "megatron_rt/comm.h"
#include "megatron_rt/layernorm.h"
#include "megatron_rt/reduce.h"
#include "megatron_rt/rope.h"

#include <memory>
#include <optional>

namespace mrt {

MRT_VECTOR_KERNEL void widenInto(const mrt_bf16 *src, float *dst, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    dst[i] = widen(src[i]);
}

MRT_VECTOR_KERNEL void narrowInto(const float *src, mrt_bf16 *dst,
                                  int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    dst[i] = narrow(src[i]);
}

Widened::Widened(const mrt_bf16 *source, int64_t n) : values(n) {
  widenInto(source, values.data(), n);
}

Narrowed::Narrowed(mrt_bf16 *destination, int64_t n, const mrt_bf16 *initial)
    : destination(destination), n(n), values(n) {
  if (initial)
    widenInto(initial, values.data(), n);
}

Narrowed::~Narrowed() { narrowInto(values.data(), destination, n); }

WidenedRows::WidenedRows(const mrt_bf16 *src, int64_t rows, int64_t cols,
                         int64_t ld)
    : values(rows * cols) {
  float *out = values.data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = widen(src[r * ld + c]);
}

void narrowRows(const float *values, int64_t rows, int64_t cols,
                mrt_bf16 *dst, int64_t ld) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      dst[r * ld + c] = narrow(values[r * cols + c]);
}

} // namespace mrt

using mrt::Narrowed;
using mrt::Widened;

extern "C" void mrt_layernorm_fwd_bf16(const mrt_bf16 *x, const mrt_bf16 *w,
                                       const mrt_bf16 *b, mrt_bf16 *y,
                                       float *mean, float *rstd, int64_t rows,
                                       int64_t cols, float eps) {
  Widened xs(x, rows * cols), ws(w, cols), bs(b, cols);
  Narrowed ys(y, rows * cols);
  mrt_layernorm_fwd_f32(xs.data(), ws.data(), bs.data(), ys.data(), mean, rstd,
                        rows, cols, eps);
}

extern "C" void mrt_residual_layernorm_fwd_bf16(
    const mrt_bf16 *x, const mrt_bf16 *delta, const mrt_bf16 *delta_bias,
    mrt_bf16 *sum, const mrt_bf16 *w, const mrt_bf16 *b, mrt_bf16 *y,
    float *mean, float *rstd, int64_t rows, int64_t cols, float eps) {
  // The norm is of the sum as stored, rounded, as the CUDA kernel computes
  // it: its statistics are those the backward pass recomputes from it.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t i = r * cols + c;
      sum[i] = mrt::narrow(mrt::widen(x[i]) +
                           (mrt::widen(delta[i]) + mrt::widen(delta_bias[c])));
    }
  mrt_layernorm_fwd_bf16(sum, w, b, y, mean, rstd, rows, cols, eps);
}

extern "C" void mrt_layernorm_stats_bf16(const mrt_bf16 *x, float *mean,
                                         float *rstd, int64_t rows,
                                         int64_t cols, float eps) {
  Widened xs(x, rows * cols);
  mrt_layernorm_stats_f32(xs.data(), mean, rstd, rows, cols, eps);
}

extern "C" void mrt_layernorm_bwd_bf16(const mrt_bf16 *dy, const mrt_bf16 *x,
                                       const mrt_bf16 *w, const float *mean,
                                       const float *rstd, mrt_bf16 *dx,
                                       float *dw, float *db, int64_t rows,
                                       int64_t cols) {
  Widened dys(dy, rows * cols), xs(x, rows * cols), ws(w, cols);
  Narrowed dxs(dx, rows * cols);
  mrt_layernorm_bwd_f32(dys.data(), xs.data(), ws.data(), mean, rstd,
                        dxs.data(), dw, db, rows, cols);
}

extern "C" void mrt_rmsnorm_fwd_bf16(const mrt_bf16 *x, const mrt_bf16 *w,
                                     mrt_bf16 *y, float *rstd, int64_t rows,
                                     int64_t cols, float eps) {
  Widened xs(x, rows * cols), ws(w, cols);
  Narrowed ys(y, rows * cols);
  mrt_rmsnorm_fwd_f32(xs.data(), ws.data(), ys.data(), rstd, rows, cols, eps);
}

extern "C" void mrt_residual_rmsnorm_fwd_bf16(const mrt_bf16 *x,
                                              const mrt_bf16 *delta,
                                              mrt_bf16 *sum, const mrt_bf16 *w,
                                              mrt_bf16 *y, float *rstd,
                                              int64_t rows, int64_t cols,
                                              float eps) {
  // Of the sum as stored, rounded, as for the layer norm above.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows * cols; ++i)
    sum[i] = mrt::narrow(mrt::widen(x[i]) + mrt::widen(delta[i]));
  mrt_rmsnorm_fwd_bf16(sum, w, y, rstd, rows, cols, eps);
}

extern "C" void mrt_rmsnorm_stats_bf16(const mrt_bf16 *x, float *rstd,
                                       int64_t rows, int64_t cols, float eps) {
  Widened xs(x, rows * cols);
  mrt_rmsnorm_stats_f32(xs.data(), rstd, rows, cols, eps);
}

extern "C" void mrt_rmsnorm_bwd_bf16(const mrt_bf16 *dy, const mrt_bf16 *x,
                                     const mrt_bf16 *w, const float *rstd,
                                     mrt_bf16 *dx, float *dw, int64_t rows,
                                     int64_t cols) {
  Widened dys(dy, rows * cols), xs(x, rows * cols), ws(w, cols);
  Narrowed dxs(dx, rows * cols);
  mrt_rmsnorm_bwd_f32(dys.data(), xs.data(), ws.data(), rstd, dxs.data(), dw,
                      rows, cols);
}

extern "C" void mrt_rope_bf16(const mrt_bf16 *x, const int32_t *positions,
                              mrt_bf16 *y, int64_t B, int64_t T, int64_t H,
                              int64_t D, double theta, int64_t direction) {
  Widened xs(x, B * T * H * D);
  Narrowed ys(y, B * T * H * D);
  mrt_rope_f32(xs.data(), positions, ys.data(), B, T, H, D, theta, direction);
}

extern "C" void mrt_sum_rows_bf16(const mrt_bf16 *x, int64_t rows, int64_t cols,
                                  float *out) {
  Widened values(x, rows * cols);
  mrt_sum_rows_f32(values.data(), rows, cols, out);
}

extern "C" void mrt_all_reduce_bf16(mrt_context *ctx, int axis, mrt_bf16 *buf,
                                    int64_t n, int op) {
  Narrowed values(buf, n, buf);
  mrt_all_reduce_f32(ctx, axis, values.data(), n, op);
}

/// The sum runs in an fp32 copy the progress thread narrows back into buf
/// once it is complete, before the wait returns.
extern "C" int64_t mrt_all_reduce_start_bf16(mrt_context *ctx, int axis,
                                             mrt_bf16 *buf, int64_t n, int op) {
  auto staging = std::make_shared<Narrowed>(buf, n, buf);
  return mrt::mpiAllReduceStart(mrt::meshOf(ctx), axis, staging->data(), n, op,
                                [staging]() mutable { staging.reset(); });
}

/// Gathering moves bits: no fp32 copy.
extern "C" int64_t mrt_all_gather_start_bf16(mrt_context *ctx, int axis,
                                             mrt_bf16 *buf, int64_t n_per_rank) {
  return mrt::mpiAllGatherStart(mrt::meshOf(ctx), axis, buf,
                                n_per_rank * int64_t(sizeof(mrt_bf16)));
}

extern "C" void mrt_all_gather_bf16(mrt_context *ctx, int axis,
                                    const mrt_bf16 *in, mrt_bf16 *out,
                                    int64_t n_per_rank) {
  Widened local(in, n_per_rank);
  Narrowed gathered(out, mrt_axis_size(ctx, axis) * n_per_rank);
  mrt_all_gather_f32(ctx, axis, local.data(), gathered.data(), n_per_rank);
}

extern "C" void mrt_reduce_scatter_bf16(mrt_context *ctx, int axis,
                                        const mrt_bf16 *in, mrt_bf16 *out,
                                        int64_t n_per_rank) {
  Widened chunks(in, mrt_axis_size(ctx, axis) * n_per_rank);
  Narrowed reduced(out, n_per_rank);
  mrt_reduce_scatter_f32(ctx, axis, chunks.data(), reduced.data(), n_per_rank);
}
