// The entry points of comm.h both runtimes answer from the MPI mesh alone.
#include "megatron_rt/comm.h"

#include "context_mesh.h"

extern "C" int64_t mrt_axis_rank(const mrt_context *ctx, int axis) {
  const mrt::MpiMesh &mesh = mrt::meshOf(ctx);
  return mesh.rank[mrt::checkedAxis(&mesh, axis, "axis_rank")];
}

extern "C" int64_t mrt_axis_size(const mrt_context *ctx, int axis) {
  const mrt::MpiMesh &mesh = mrt::meshOf(ctx);
  return mesh.size[mrt::checkedAxis(&mesh, axis, "axis_size")];
}

extern "C" int64_t mrt_world_rank(const mrt_context *ctx) {
  return mrt::meshOf(ctx).worldRank;
}

extern "C" float mrt_all_reduce_scalar_f32(mrt_context *ctx, int axis,
                                           float value, int op) {
  mrt::mpiAllReduce(mrt::meshOf(ctx), axis, &value, 1, op);
  return value;
}

extern "C" void mrt_suspend_collective_timeout(mrt_context *ctx,
                                               int suspended) {
  mrt::suspendCollectiveTimeout(mrt::meshOf(ctx), suspended != 0);
}

extern "C" double mrt_exposed_comm_seconds(const mrt_context *ctx) {
  return mrt::meshOf(ctx).queue->exposedSeconds();
}
