// MPI meshes shared by the CPU and CUDA runtimes (see mpi_mesh.h).
#include "mpi_mesh.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace mrt {
namespace {

// MPI can be initialised once per process: the library finalises it only if
// it started it, and only when its last context is gone.
bool libraryInitialisedMpi = false;
int liveContexts = 0;

} // namespace

void writeError(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0)
    return;
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(err, errlen, fmt, args);
  va_end(args);
}

void abortJob(int worldRank, const char *fmt, ...) {
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

/// A thread that ends the process when the collective in flight outlasts the
/// timeout. The collectives stay MPI's blocking ones (a nonblocking one with
/// a polling deadline would run Open MPI's slower libnbc algorithms): the
/// caller marks entering and leaving, which costs two atomic stores. The
/// thread cannot call MPI (another thread may be inside it), so it exits the
/// process, and mpirun then ends every other rank, the stopped
/// one included.
class CollectiveWatch {
public:
  CollectiveWatch(int worldRank, double timeoutSeconds)
      : worldRank(worldRank), timeout(timeoutSeconds),
        thread([this] { run(); }) {}
  ~CollectiveWatch() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_one();
    thread.join();
  }

  void enter(const char *collective, int axis) {
    what.store(collective, std::memory_order_relaxed);
    overAxis.store(axis, std::memory_order_relaxed);
    since.store(now(), std::memory_order_release);
  }
  void leave() { since.store(kIdle, std::memory_order_release); }
  void suspend(bool on) { suspended.store(on, std::memory_order_release); }

private:
  using Clock = std::chrono::steady_clock;
  static constexpr int64_t kIdle = -1;
  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               Clock::now().time_since_epoch())
        .count();
  }

  void run() {
    // A tenth of the limit between looks (a hang is caught within 10%),
    // between 1 ms and 1 s: never a busy loop, nor a lost second.
    const auto period = std::chrono::milliseconds(static_cast<int64_t>(
        std::clamp(timeout * 100.0, 1.0, 1000.0)));
    std::unique_lock<std::mutex> lock(mutex);
    while (!wake.wait_for(lock, period, [this] { return stopping; })) {
      const int64_t start = since.load(std::memory_order_acquire);
      if (start == kIdle || suspended.load(std::memory_order_acquire) ||
          (now() - start) * 1e-9 <= timeout)
        continue;
      std::fprintf(stderr,
                   "megatron-rt: rank %d: %s over %s did not finish within "
                   "%g s: a rank of its group stopped answering or died "
                   "(megatron-run --collective-timeout sets the limit)\n",
                   worldRank, what.load(),
                   overAxis.load() == MRT_AXIS_DP ? MGT_AXIS_NAME_DP
                                                  : MGT_AXIS_NAME_TP,
                   timeout);
      std::fflush(stderr);
      _exit(1);
    }
  }

  const int worldRank;
  const double timeout;
  std::atomic<int64_t> since{kIdle};
  std::atomic<const char *> what{""};
  std::atomic<int> overAxis{MRT_AXIS_TP};
  std::atomic<bool> suspended{false};
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread; // last: starts once everything above is initialised
};

namespace {

/// Marks a collective in flight for the mesh's watch, for its scope.
class Watched {
public:
  Watched(const MpiMesh &mesh, const char *what, int axis)
      : watch(mesh.watch.get()) {
    if (watch)
      watch->enter(what, axis);
  }
  ~Watched() {
    if (watch)
      watch->leave();
  }

private:
  CollectiveWatch *watch;
};

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
  // One thread at a time talks to MPI: the caller, or the collective
  // queue's progress thread while the caller computes; OpenMP threads never
  // do.
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
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

// The (dp, tp) mesh for this world: tensor-parallel groups of tp_size
// neighbouring ranks, as many of them as the world holds.
bool meshShape(int worldSize, int64_t tpSize, std::vector<int> &size,
               char *err, size_t errlen) {
  if (tpSize < 1 || worldSize % tpSize != 0) {
    writeError(err, errlen,
               "megatron-rt: the %d MPI ranks are not a multiple of tp_size "
               "%lld",
               worldSize, static_cast<long long>(tpSize));
    return false;
  }
  size.assign(2, 0);
  size[MRT_AXIS_DP] = static_cast<int>(worldSize / tpSize);
  size[MRT_AXIS_TP] = static_cast<int>(tpSize);
  return true;
}

// Every sub-axis of tp: each (stride, size) with size > 1 whose product
// divides tp, other than tp itself. A rank's group holds the tp ranks with
// its tp_rank / (stride * size) and tp_rank % stride.
void addSubAxes(MpiMesh &ctx) {
  const int tp = ctx.size[MRT_AXIS_TP], t = ctx.rank[MRT_AXIS_TP];
  for (int stride = 1; stride < tp; ++stride)
    for (int size = 2; stride * size <= tp; ++size) {
      if (tp % (stride * size) != 0 || (stride == 1 && size == tp))
        continue;
      ctx.subAxisIds.push_back(MRT_AXIS_TP_SUB(stride, size));
      ctx.rank.push_back((t / stride) % size);
      ctx.size.push_back(size);
      ctx.color.push_back((t / (stride * size)) * stride + t % stride);
    }
}

// One communicator per mesh axis, split from a private duplicate of the world
// so that the caller's MPI_COMM_WORLD error handler is left untouched.
void splitAxes(MpiMesh &ctx) {
  MPI_Comm world;
  check(ctx.worldRank, "MPI_Comm_dup", MPI_Comm_dup(MPI_COMM_WORLD, &world));
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  ctx.rank.assign(2, 0);
  ctx.color.assign(2, 0);
  ctx.comm.assign(2, MPI_COMM_NULL);
  ctx.rank[MRT_AXIS_TP] = ctx.worldRank % ctx.size[MRT_AXIS_TP];
  ctx.rank[MRT_AXIS_DP] = ctx.worldRank / ctx.size[MRT_AXIS_TP];
  check(ctx.worldRank, "MPI_Comm_split(tp)",
        MPI_Comm_split(world, ctx.rank[MRT_AXIS_DP], ctx.rank[MRT_AXIS_TP],
                       &ctx.comm[MRT_AXIS_TP]));
  check(ctx.worldRank, "MPI_Comm_split(dp)",
        MPI_Comm_split(world, ctx.rank[MRT_AXIS_TP], ctx.rank[MRT_AXIS_DP],
                       &ctx.comm[MRT_AXIS_DP]));
  addSubAxes(ctx);
  for (size_t slot = 2; slot < ctx.rank.size(); ++slot)
    check(ctx.worldRank, "MPI_Comm_split(tp sub-axis)",
          MPI_Comm_split(ctx.comm[MRT_AXIS_TP], ctx.color[slot],
                         ctx.rank[slot], &ctx.comm.emplace_back()));
  for (MPI_Comm comm : ctx.comm)
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_free(&world);
}

} // namespace

int checkedAxis(const MpiMesh *ctx, int axis, const char *what) {
  if (axis == MRT_AXIS_DP || axis == MRT_AXIS_TP)
    return axis;
  auto sub = std::find(ctx->subAxisIds.begin(), ctx->subAxisIds.end(), axis);
  if (sub == ctx->subAxisIds.end())
    abortJob(ctx->worldRank, "%s: invalid axis %d (not dp, tp or a sub-axis "
             "of tp=%d)", what, axis, ctx->size[MRT_AXIS_TP]);
  return 2 + static_cast<int>(sub - ctx->subAxisIds.begin());
}

int checkedCount(const MpiMesh *ctx, int64_t n, const char *what) {
  if (n < 0 || n > INT_MAX)
    abortJob(ctx->worldRank, "%s: count %lld does not fit in an MPI int", what,
             static_cast<long long>(n));
  return static_cast<int>(n);
}

namespace {

MPI_Op checkedOp(const MpiMesh *ctx, int op) {
  if (op == MRT_REDUCE_SUM)
    return MPI_SUM;
  if (op == MRT_REDUCE_MAX)
    return MPI_MAX;
  abortJob(ctx->worldRank, "all_reduce: invalid reduce op %d", op);
}

} // namespace

bool createMpiMesh(int64_t tpSize, double timeoutSeconds, MpiMesh &mesh,
                   char *err, size_t errlen) {
  writeError(err, errlen, "%s", "");
  if (!ensureMpiInitialised(err, errlen))
    return false;
  int worldSize = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  mesh = MpiMesh{};
  MPI_Comm_rank(MPI_COMM_WORLD, &mesh.worldRank);
  if (!meshShape(worldSize, tpSize, mesh.size, err, errlen)) {
    finaliseMpiIfUnused();
    return false;
  }
  splitAxes(mesh);
  if (timeoutSeconds > 0)
    mesh.watch =
        std::make_shared<CollectiveWatch>(mesh.worldRank, timeoutSeconds);
  int threadLevel = MPI_THREAD_SINGLE;
  MPI_Query_thread(&threadLevel);
  mesh.queue =
      std::make_shared<CollectiveQueue>(threadLevel >= MPI_THREAD_SERIALIZED);
  ++liveContexts;
  return true;
}

void suspendCollectiveTimeout(const MpiMesh &mesh, bool suspended) {
  if (mesh.watch)
    mesh.watch->suspend(suspended);
}

void destroyMpiMesh(MpiMesh &mesh) {
  mesh.queue.reset(); // its thread finishes what was started
  mesh.watch.reset();
  for (MPI_Comm &comm : mesh.comm)
    MPI_Comm_free(&comm);
  --liveContexts;
  finaliseMpiIfUnused();
}

void mpiAllReduce(const MpiMesh &mesh, int axis, float *buf, int64_t n,
                  int op) {
  const char *what = "all_reduce";
  int count = checkedCount(&mesh, n, what);
  MPI_Op reduction = checkedOp(&mesh, op);
  MPI_Comm comm = mesh.comm[checkedAxis(&mesh, axis, what)];
  mesh.queue->runBlocking([&] {
    Watched watched(mesh, what, axis);
    check(mesh.worldRank, what,
          MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, reduction, comm));
  });
}

namespace {

/// Drives `request` to completion from the progress thread: MPI_Test
/// advances Open MPI's schedule of the collective. While the caller
/// computes, a sleep between tests leaves it the core; once it waits, the
/// thread tests without pause, as a blocking collective would.
void progress(const MpiMesh &mesh, const char *what, MPI_Request &request) {
  for (;;) {
    int done = 0;
    check(mesh.worldRank, what, MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done)
      return;
    if (!mesh.queue->callerWaiting())
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

/// Queues the nonblocking collective `issue` starts on axis `a`'s
/// communicator (watched as `collective`): the progress thread issues it
/// behind every earlier one, drives it to completion, then runs `then`.
template <typename Issue>
int64_t startQueued(const MpiMesh &mesh, const char *what,
                    const char *collective, int a, Issue issue,
                    std::function<void()> then) {
  return mesh.queue->start([&mesh, what, collective, a, issue,
                            then = std::move(then)] {
    {
      Watched watched(mesh, collective, a);
      MPI_Request request;
      check(mesh.worldRank, what, issue(mesh.comm[a], &request));
      progress(mesh, what, request);
    }
    if (then)
      then();
  });
}

} // namespace

int64_t mpiAllReduceStart(const MpiMesh &mesh, int axis, float *buf, int64_t n,
                          int op, std::function<void()> then) {
  const char *what = "all_reduce_start";
  int count = checkedCount(&mesh, n, what);
  MPI_Op reduction = checkedOp(&mesh, op);
  int a = checkedAxis(&mesh, axis, what);
  return startQueued(
      mesh, what, "all_reduce", a,
      [buf, count, reduction](MPI_Comm comm, MPI_Request *request) {
        return MPI_Iallreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, reduction,
                              comm, request);
      },
      std::move(then));
}

int64_t mpiReduceScatterStart(const MpiMesh &mesh, int axis, float *buf,
                              int64_t nPerRank) {
  const char *what = "reduce_scatter_start";
  int count = checkedCount(&mesh, nPerRank, what);
  int a = checkedAxis(&mesh, axis, what);
  // In place, MPI leaves this rank's chunk at the start of the buffer.
  return startQueued(
      mesh, what, "reduce_scatter", a,
      [buf, count](MPI_Comm comm, MPI_Request *request) {
        return MPI_Ireduce_scatter_block(MPI_IN_PLACE, buf, count, MPI_FLOAT,
                                         MPI_SUM, comm, request);
      },
      {});
}

int64_t mpiAllGatherStart(const MpiMesh &mesh, int axis, void *buf,
                          int64_t bytesPerRank) {
  const char *what = "all_gather_start";
  int count = checkedCount(&mesh, bytesPerRank, what);
  int a = checkedAxis(&mesh, axis, what);
  // Bytes: gathering moves values, whatever their type.
  return startQueued(
      mesh, what, "all_gather", a,
      [buf, count](MPI_Comm comm, MPI_Request *request) {
        return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_BYTE, buf, count,
                              MPI_BYTE, comm, request);
      },
      {});
}

void mpiWait(const MpiMesh &mesh, int64_t ticket) {
  if (!mesh.queue->wait(ticket))
    abortJob(mesh.worldRank, "collective_wait: ticket %lld was never started",
             static_cast<long long>(ticket));
}

void mpiAllGather(const MpiMesh &mesh, int axis, const float *in, float *out,
                  int64_t nPerRank) {
  const char *what = "all_gather";
  int count = checkedCount(&mesh, nPerRank, what);
  int a = checkedAxis(&mesh, axis, what);
  // MPI forbids aliased buffers; this rank's own slot is its in-place form.
  bool inPlace = in == out + static_cast<int64_t>(mesh.rank[a]) * nPerRank;
  mesh.queue->runBlocking([&] {
    Watched watched(mesh, what, a);
    check(mesh.worldRank, what,
          MPI_Allgather(inPlace ? MPI_IN_PLACE : in, count, MPI_FLOAT, out,
                        count, MPI_FLOAT, mesh.comm[a]));
  });
}

void mpiReduceScatter(const MpiMesh &mesh, int axis, const float *in,
                      float *out, int64_t nPerRank) {
  const char *what = "reduce_scatter";
  int count = checkedCount(&mesh, nPerRank, what);
  MPI_Comm comm = mesh.comm[checkedAxis(&mesh, axis, what)];
  mesh.queue->runBlocking([&] {
    Watched watched(mesh, what, axis);
    check(mesh.worldRank, what,
          MPI_Reduce_scatter_block(in, out, count, MPI_FLOAT, MPI_SUM, comm));
  });
}

void mpiBroadcast(const MpiMesh &mesh, int axis, void *buf, int64_t bytes,
                  int root) {
  const char *what = "broadcast";
  int count = checkedCount(&mesh, bytes, what);
  MPI_Comm comm = mesh.comm[checkedAxis(&mesh, axis, what)];
  mesh.queue->runBlocking([&] {
    Watched watched(mesh, what, axis);
    check(mesh.worldRank, what, MPI_Bcast(buf, count, MPI_BYTE, root, comm));
  });
}

} // namespace mrt
