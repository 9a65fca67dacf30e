#include "megatron_rt/comm.h"

#include <mpi.h>

#include <climits>
#include <cstdarg>
#include <cstdio>

struct mrt_context {
  int worldRank;
  int rank[2];
  int size[2];
  MPI_Comm comm[2]; // indexed by MRT_AXIS_DP / MRT_AXIS_TP
};

namespace {

// MPI can be initialised once per process: the library finalises it only if
// it started it, and only when its last context is gone.
bool libraryInitialisedMpi = false;
int liveContexts = 0;

void writeError(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void writeError(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0)
    return;
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(err, errlen, fmt, args);
  va_end(args);
}

// Aborting the whole job, rather than returning, guarantees that the other
// ranks do not wait forever in a collective this rank will never join.
[[noreturn]] void abortJob(int worldRank, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
[[noreturn]] void abortJob(int worldRank, const char *fmt, ...) {
  // One write per message keeps lines from several ranks from interleaving.
  char message[1024];
  int prefix = std::snprintf(message, sizeof(message),
                             "megatron-rt: rank %d: ", worldRank);
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message + prefix, sizeof(message) - prefix, fmt, args);
  va_end(args);
  std::fprintf(stderr, "%s\n", message);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  __builtin_unreachable();
}

void check(int worldRank, const char *what, int code) {
  if (code == MPI_SUCCESS)
    return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, message, &length);
  abortJob(worldRank, "%s failed: %s", what, message);
}

bool ensureMpiInitialised(char *err, size_t errlen) {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (finalised) {
    writeError(err, errlen, "megatron-rt: MPI was already finalised");
    return false;
  }
  if (initialised)
    return true;
  // Only the calling thread talks to MPI; OpenMP threads never do.
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) !=
      MPI_SUCCESS) {
    writeError(err, errlen, "megatron-rt: MPI_Init_thread failed");
    return false;
  }
  libraryInitialisedMpi = true;
  return true;
}

void finaliseMpiIfUnused() {
  if (libraryInitialisedMpi && liveContexts == 0) {
    MPI_Finalize();
    libraryInitialisedMpi = false;
  }
}

// The (dp, tp) mesh for this world; data parallelism is not supported yet,
// so the whole world must be one tensor-parallel group.
bool meshShape(int worldSize, int64_t tpSize, int (&size)[2], char *err,
               size_t errlen) {
  if (tpSize != worldSize) {
    writeError(err, errlen,
               "megatron-rt: tp_size %lld does not match the %d MPI ranks "
               "(data parallelism is not supported yet: launch exactly "
               "tp_size ranks)",
               static_cast<long long>(tpSize), worldSize);
    return false;
  }
  size[MRT_AXIS_DP] = 1;
  size[MRT_AXIS_TP] = static_cast<int>(tpSize);
  return true;
}

// One communicator per mesh axis, split from a private duplicate of the world
// so that the caller's MPI_COMM_WORLD error handler is left untouched.
void splitAxes(mrt_context &ctx) {
  MPI_Comm world;
  check(ctx.worldRank, "MPI_Comm_dup", MPI_Comm_dup(MPI_COMM_WORLD, &world));
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  ctx.rank[MRT_AXIS_TP] = ctx.worldRank % ctx.size[MRT_AXIS_TP];
  ctx.rank[MRT_AXIS_DP] = ctx.worldRank / ctx.size[MRT_AXIS_TP];
  check(ctx.worldRank, "MPI_Comm_split(tp)",
        MPI_Comm_split(world, ctx.rank[MRT_AXIS_DP], ctx.rank[MRT_AXIS_TP],
                       &ctx.comm[MRT_AXIS_TP]));
  check(ctx.worldRank, "MPI_Comm_split(dp)",
        MPI_Comm_split(world, ctx.rank[MRT_AXIS_TP], ctx.rank[MRT_AXIS_DP],
                       &ctx.comm[MRT_AXIS_DP]));
  for (MPI_Comm comm : ctx.comm)
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_free(&world);
}

int checkedAxis(const mrt_context *ctx, int axis, const char *what) {
  if (axis != MRT_AXIS_DP && axis != MRT_AXIS_TP)
    abortJob(ctx->worldRank, "%s: invalid axis %d", what, axis);
  return axis;
}

int checkedCount(const mrt_context *ctx, int64_t n, const char *what) {
  if (n < 0 || n > INT_MAX)
    abortJob(ctx->worldRank, "%s: count %lld does not fit in an MPI int", what,
             static_cast<long long>(n));
  return static_cast<int>(n);
}

MPI_Op checkedOp(const mrt_context *ctx, int op) {
  if (op == MRT_REDUCE_SUM)
    return MPI_SUM;
  if (op == MRT_REDUCE_MAX)
    return MPI_MAX;
  abortJob(ctx->worldRank, "all_reduce: invalid reduce op %d", op);
}

} // namespace

extern "C" mrt_context *mrt_context_create(int64_t tp_size, char *err,
                                           size_t errlen) {
  writeError(err, errlen, "%s", "");
  if (!ensureMpiInitialised(err, errlen))
    return nullptr;
  int worldSize = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  mrt_context ctx{};
  MPI_Comm_rank(MPI_COMM_WORLD, &ctx.worldRank);
  if (!meshShape(worldSize, tp_size, ctx.size, err, errlen)) {
    finaliseMpiIfUnused();
    return nullptr;
  }
  splitAxes(ctx);
  ++liveContexts;
  return new mrt_context(ctx);
}

extern "C" void mrt_context_destroy(mrt_context *ctx) {
  if (!ctx)
    return;
  for (MPI_Comm &comm : ctx->comm)
    MPI_Comm_free(&comm);
  delete ctx;
  --liveContexts;
  finaliseMpiIfUnused();
}

extern "C" int64_t mrt_axis_rank(const mrt_context *ctx, int axis) {
  return ctx->rank[checkedAxis(ctx, axis, "axis_rank")];
}

extern "C" int64_t mrt_axis_size(const mrt_context *ctx, int axis) {
  return ctx->size[checkedAxis(ctx, axis, "axis_size")];
}

extern "C" int64_t mrt_world_rank(const mrt_context *ctx) {
  return ctx->worldRank;
}

extern "C" void mrt_all_reduce_f32(mrt_context *ctx, int axis, float *buf,
                                   int64_t n, int op) {
  const char *what = "all_reduce";
  check(ctx->worldRank, what,
        MPI_Allreduce(MPI_IN_PLACE, buf, checkedCount(ctx, n, what), MPI_FLOAT,
                      checkedOp(ctx, op),
                      ctx->comm[checkedAxis(ctx, axis, what)]));
}

extern "C" void mrt_all_gather_f32(mrt_context *ctx, int axis, const float *in,
                                   float *out, int64_t n_per_rank) {
  const char *what = "all_gather";
  int count = checkedCount(ctx, n_per_rank, what);
  int a = checkedAxis(ctx, axis, what);
  // MPI forbids aliased buffers; this rank's own slot is its in-place form.
  bool inPlace = in == out + static_cast<int64_t>(ctx->rank[a]) * n_per_rank;
  check(ctx->worldRank, what,
        MPI_Allgather(inPlace ? MPI_IN_PLACE : in, count, MPI_FLOAT, out, count,
                      MPI_FLOAT, ctx->comm[a]));
}

extern "C" void mrt_reduce_scatter_f32(mrt_context *ctx, int axis,
                                       const float *in, float *out,
                                       int64_t n_per_rank) {
  const char *what = "reduce_scatter";
  check(ctx->worldRank, what,
        MPI_Reduce_scatter_block(in, out, checkedCount(ctx, n_per_rank, what),
                                 MPI_FLOAT, MPI_SUM,
                                 ctx->comm[checkedAxis(ctx, axis, what)]));
}

extern "C" void mrt_broadcast_bytes(mrt_context *ctx, int axis, void *buf,
                                    int64_t bytes, int root) {
  const char *what = "broadcast";
  check(ctx->worldRank, what,
        MPI_Bcast(buf, checkedCount(ctx, bytes, what), MPI_BYTE, root,
                  ctx->comm[checkedAxis(ctx, axis, what)]));
}

extern "C" void mrt_barrier(mrt_context *ctx, int axis) {
  const char *what = "barrier";
  check(ctx->worldRank, what,
        MPI_Barrier(ctx->comm[checkedAxis(ctx, axis, what)]));
}
