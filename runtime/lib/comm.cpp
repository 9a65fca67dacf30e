// The CPU runtime's context: the MPI mesh alone.
#include "megatron_rt/comm.h"

#include "context_mesh.h"

struct mrt_context {
  mrt::MpiMesh mesh;
};

const mrt::MpiMesh &mrt::meshOf(const mrt_context *ctx) { return ctx->mesh; }

extern "C" mrt_context *mrt_context_create(int64_t tp_size,
                                           double collective_timeout_s,
                                           char *err, size_t errlen) {
  mrt::MpiMesh mesh;
  if (!mrt::createMpiMesh(tp_size, collective_timeout_s, mesh, err, errlen))
    return nullptr;
  return new mrt_context{mesh};
}

extern "C" void mrt_context_destroy(mrt_context *ctx) {
  if (!ctx)
    return;
  mrt::destroyMpiMesh(ctx->mesh);
  delete ctx;
}

extern "C" void mrt_all_reduce_f32(mrt_context *ctx, int axis, float *buf,
                                   int64_t n, int op) {
  mrt::mpiAllReduce(ctx->mesh, axis, buf, n, op);
}

extern "C" void mrt_all_gather_f32(mrt_context *ctx, int axis, const float *in,
                                   float *out, int64_t n_per_rank) {
  mrt::mpiAllGather(ctx->mesh, axis, in, out, n_per_rank);
}

extern "C" void mrt_reduce_scatter_f32(mrt_context *ctx, int axis,
                                       const float *in, float *out,
                                       int64_t n_per_rank) {
  mrt::mpiReduceScatter(ctx->mesh, axis, in, out, n_per_rank);
}

extern "C" int64_t mrt_all_reduce_start_f32(mrt_context *ctx, int axis,
                                             float *buf, int64_t n, int op) {
  return mrt::mpiAllReduceStart(ctx->mesh, axis, buf, n, op);
}

extern "C" int64_t mrt_reduce_scatter_start_f32(mrt_context *ctx, int axis,
                                                 float *buf,
                                                 int64_t n_per_rank) {
  return mrt::mpiReduceScatterStart(ctx->mesh, axis, buf, n_per_rank);
}

extern "C" int64_t mrt_all_gather_start_f32(mrt_context *ctx, int axis,
                                             float *buf, int64_t n_per_rank) {
  return mrt::mpiAllGatherStart(ctx->mesh, axis, buf,
                                n_per_rank * int64_t(sizeof(float)));
}

extern "C" void mrt_collective_wait(mrt_context *ctx, int64_t ticket) {
  mrt::mpiWait(ctx->mesh, ticket);
}

extern "C" void mrt_broadcast_bytes(mrt_context *ctx, int axis, void *buf,
                                    int64_t bytes, int root) {
  mrt::mpiBroadcast(ctx->mesh, axis, buf, bytes, root);
}
