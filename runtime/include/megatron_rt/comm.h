/* Communicators over MPI: a per-rank context holding a (dp, tp) device mesh,
 * tp varying fastest (world rank = dp_rank * tp_size + tp_rank), with one MPI
 * communicator per axis. Any MPI failure inside a collective prints
 * "megatron-rt: rank R: <collective> failed: <MPI error>" to stderr and calls
 * MPI_Abort(MPI_COMM_WORLD, 1), so a failing rank never leaves others hanging.
 * Counts are elements (bytes for broadcast) and must fit in an int. */
#ifndef MEGATRON_RT_COMM_H
#define MEGATRON_RT_COMM_H

#include "megatron_rt/api.h"
#include "megatron_rt/contract.h" /* MRT_AXIS_*, MRT_REDUCE_* */

MRT_EXTERN_C_BEGIN

typedef struct mrt_context mrt_context;

/* Initialises MPI if needed and builds the (dp, tp) mesh: the MPI world size
 * must be a multiple of tp_size, and dp is the quotient; world rank r is
 * (dp r / tp_size, tp r % tp_size). A collective unfinished after
 * collective_timeout_s seconds (0: no limit) ends the job with an error
 * naming it: a rank that stopped answering would hold every other rank in it
 * for ever. On failure returns NULL and writes a NUL-terminated message into
 * err[errlen]. */
MRT_API mrt_context *mrt_context_create(int64_t tp_size,
                                        double collective_timeout_s, char *err,
                                        size_t errlen);

/* While `suspended` is non-zero, collectives on host buffers wait without
 * the context's timeout: for the launcher's own agreements around slow I/O
 * (every other rank waits while one writes a checkpoint for as long as the
 * file system takes). */
MRT_API void mrt_suspend_collective_timeout(mrt_context *ctx, int suspended);

/* Frees the communicators; finalises MPI when the library initialised it and
 * this was its last context (MPI cannot be initialised again afterwards). */
MRT_API void mrt_context_destroy(mrt_context *ctx);

/* Rank/size along axis MRT_AXIS_DP or MRT_AXIS_TP, and the MPI world rank. */
MRT_API int64_t mrt_axis_rank(const mrt_context *ctx, int axis);
MRT_API int64_t mrt_axis_size(const mrt_context *ctx, int axis);
MRT_API int64_t mrt_world_rank(const mrt_context *ctx);

/* In place: buf[n] becomes the element-wise op (MRT_REDUCE_SUM or
 * MRT_REDUCE_MAX) over the ranks of the axis. */
MRT_API void mrt_all_reduce_f32(mrt_context *ctx, int axis, float *buf,
                                int64_t n, int op);

/* The element-wise op of `value` over the ranks of the axis, for scalars the
 * host code of a step computes (the squared gradient norm): they never live
 * in a buffer, which on a GPU would be device memory. */
MRT_API float mrt_all_reduce_scalar_f32(mrt_context *ctx, int axis, float value,
                                        int op);

/* out [size*n_per_rank] = every rank's in [n_per_rank], in rank order. in may
 * be out + rank*n_per_rank (in place) but must not overlap out otherwise. */
MRT_API void mrt_all_gather_f32(mrt_context *ctx, int axis, const float *in,
                                float *out, int64_t n_per_rank);

/* out [n_per_rank] = sum over ranks of their in [size*n_per_rank] chunk
 * number `rank`; in and out must not overlap. */
MRT_API void mrt_reduce_scatter_f32(mrt_context *ctx, int axis, const float *in,
                                    float *out, int64_t n_per_rank);

/* The three collectives on bf16 buffers (summed in fp32 on the CPU runtime,
 * by NCCL in bf16 on the CUDA runtime). */
MRT_API void mrt_all_reduce_bf16(mrt_context *ctx, int axis, mrt_bf16 *buf,
                                 int64_t n, int op);
MRT_API void mrt_all_gather_bf16(mrt_context *ctx, int axis,
                                 const mrt_bf16 *in, mrt_bf16 *out,
                                 int64_t n_per_rank);
MRT_API void mrt_reduce_scatter_bf16(mrt_context *ctx, int axis,
                                     const mrt_bf16 *in, mrt_bf16 *out,
                                     int64_t n_per_rank);

/* Nonblocking all-reduce (what the compiler's tp.all_reduce_start lowers
 * to): buf[n] is combined in place with op (MRT_REDUCE_*) over the ranks of
 * the axis, behind every collective this rank issued before it, and the call
 * returns a ticket at once. buf must be neither read nor written until
 * mrt_collective_wait(ctx, ticket) returns. Every rank issues its
 * collectives, started and blocking, in one order, as one compiled program
 * does. The CPU runtime progresses started sums on a thread of its own
 * while the caller computes; the CUDA runtime enqueues them on its
 * communication stream, after the compute stream's work so far. */
MRT_API int64_t mrt_all_reduce_start_f32(mrt_context *ctx, int axis,
                                         float *buf, int64_t n, int op);
MRT_API int64_t mrt_all_reduce_start_bf16(mrt_context *ctx, int axis,
                                          mrt_bf16 *buf, int64_t n, int op);

/* Nonblocking reduce-scatter, in place (what the compiler's
 * tp.reduce_scatter_start lowers to): buf[size*n_per_rank] is summed over
 * the ranks of the axis, behind every collective this rank issued before
 * it, and this rank's chunk of the sum, chunk number `rank`, is left in
 * buf[0, n_per_rank); the rest of buf is then undefined. Returns a ticket
 * for mrt_collective_wait at once, like mrt_all_reduce_start_f32. */
MRT_API int64_t mrt_reduce_scatter_start_f32(mrt_context *ctx, int axis,
                                             float *buf, int64_t n_per_rank);

/* Nonblocking all-gather, in place (what the compiler's tp.all_gather_start
 * lowers to): buf[size*n_per_rank] holds the ranks' chunks of the axis in
 * rank order, this rank's at buf + rank*n_per_rank; the others arrive
 * behind every collective this rank issued before it. Returns a ticket for
 * mrt_collective_wait at once. */
MRT_API int64_t mrt_all_gather_start_f32(mrt_context *ctx, int axis,
                                         float *buf, int64_t n_per_rank);
MRT_API int64_t mrt_all_gather_start_bf16(mrt_context *ctx, int axis,
                                          mrt_bf16 *buf, int64_t n_per_rank);

/* Completes the collective of `ticket` and every one started before it: the
 * CPU runtime returns once they are done, the CUDA runtime orders the
 * compute stream's later work after them. */
MRT_API void mrt_collective_wait(mrt_context *ctx, int64_t ticket);

/* Seconds the calling thread has spent in blocking collectives and
 * mrt_collective_wait since the context was created: the communication that
 * compute did not hide. The CUDA runtime counts its host-buffer collectives
 * only; its device collectives are ordered on streams, never waited for by
 * the host. */
MRT_API double mrt_exposed_comm_seconds(const mrt_context *ctx);

/* Copies root's buf[bytes] to every rank of the axis (root: rank in axis). */
MRT_API void mrt_broadcast_bytes(mrt_context *ctx, int axis, void *buf,
                                 int64_t bytes, int root);

MRT_EXTERN_C_END

#endif /* MEGATRON_RT_COMM_H */
