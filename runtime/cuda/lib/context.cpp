// The CUDA runtime's context: the MPI mesh (bootstrap, host collectives), the
// rank's GPU and streams, one NCCL communicator per mesh axis, and a watchdog
// that ends the job when a collective fails or stops making progress.
#include "megatron_rt/comm.h"

#include "../../lib/context_mesh.h"
#include "cuda_check.h"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <utility>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

/// Watches the collectives in flight; a failed or timed-out one exits the
/// process, so mpirun ends every other rank instead of leaving them blocked
/// in the same collective.
class Watchdog {
public:
  /// `timeout`: seconds a collective may stay unfinished (0: no limit).
  Watchdog(int worldRank, int device, ncclComm_t *comms, int count,
           double timeout)
      : worldRank(worldRank), device(device), comms(comms), count(count),
        timeout(timeout), thread([this] { run(); }) {}

  ~Watchdog() {
    stop = true;
    thread.join();
    for (Pending &pending : inFlight)
      cudaEventDestroy(pending.done);
  }

  /// Called after a collective was enqueued on `stream`.
  void track(const char *what, cudaStream_t stream) {
    cudaEvent_t done;
    MRT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    MRT_CUDA_CHECK(cudaEventRecord(done, stream));
    std::lock_guard<std::mutex> lock(mutex);
    inFlight.push_back({what, done, Clock::now()});
  }

private:
  struct Pending {
    const char *what;
    cudaEvent_t done;
    Clock::time_point start;
  };

  [[noreturn]] void fail(const char *fmt, const char *what,
                         const char *detail) {
    std::fprintf(stderr, "megatron-rt: rank %d: ", worldRank);
    std::fprintf(stderr, fmt, what, detail);
    std::fprintf(stderr, "; aborting the job\n");
    std::fflush(stderr);
    // Not ncclCommAbort: it waits for NCCL's kernels and threads, which is
    // what may be stuck. Exiting frees them; mpirun then ends the others.
    std::_Exit(1);
  }

  void checkAsyncErrors() {
    for (int i = 0; i < count; ++i) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comms[i], &state);
      if (state != ncclSuccess && state != ncclInProgress)
        fail("NCCL %s failed: %s", "communicator", ncclGetErrorString(state));
    }
  }

  void retireFinished() {
    std::lock_guard<std::mutex> lock(mutex);
    while (!inFlight.empty()) {
      Pending &front = inFlight.front();
      cudaError_t state = cudaEventQuery(front.done);
      if (state == cudaErrorNotReady) {
        double waited =
            std::chrono::duration<double>(Clock::now() - front.start).count();
        if (timeout > 0 && waited > timeout)
          fail("NCCL %s did not finish within %s seconds (a peer rank died "
               "or hangs; megatron-run --collective-timeout sets the limit)",
               front.what, std::to_string(timeout).c_str());
        return;
      }
      if (state != cudaSuccess)
        fail("NCCL %s failed on the GPU: %s", front.what,
             cudaGetErrorString(state));
      cudaEventDestroy(front.done);
      inFlight.pop_front();
    }
  }

  void run() {
    cudaSetDevice(device);
    while (!stop) {
      checkAsyncErrors();
      retireFinished();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  int worldRank, device;
  ncclComm_t *comms;
  int count;
  double timeout;
  std::mutex mutex;
  std::deque<Pending> inFlight;
  std::atomic<bool> stop{false};
  std::thread thread; // last: starts once everything above is initialised
};

} // namespace

struct mrt_context {
  mrt::MpiMesh mesh;
  int device = 0;
  cudaStream_t compute = nullptr, comm = nullptr;
  // Recorded on the compute stream before every collective, which the
  // communication stream waits for; reusing it is safe because a wait
  // captures the record made before it.
  cudaEvent_t computeReady = nullptr;
  // Indexed by the mesh's axis slots (MRT_AXIS_DP, MRT_AXIS_TP, tp's
  // sub-axes).
  std::vector<ncclComm_t> nccl;
  Watchdog *watchdog = nullptr;
  // Each issued collective's ticket and the event recorded after it on the
  // communication stream, until a wait orders the compute stream after it.
  std::map<int64_t, cudaEvent_t> issued;
  std::vector<cudaEvent_t> spareEvents;
  int64_t nextTicket = 0;
};

namespace {

// Generated code and kernels find the rank's stream here; a process drives
// one GPU, so it holds one context at a time.
mrt_context *current = nullptr;

/// This rank's index among the ranks on its node (which picks its GPU) and
/// their number.
std::pair<int, int> nodeLocalRankAndSize() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                      &node);
  int rank = 0, size = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &size);
  MPI_Comm_free(&node);
  return {rank, size};
}

/// Picks this rank's GPU; false (with the reason in err) when it has none
/// or its node has fewer GPUs than ranks: NCCL cannot put two ranks on one
/// GPU. Collective: the node split comes first on every rank.
bool selectLocalDevice(mrt_context &ctx, char *err, size_t errlen) {
  auto [localRank, localSize] = nodeLocalRankAndSize();
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    mrt::writeError(err, errlen,
                    "megatron-rt: this step was compiled for CUDA but no "
                    "usable GPU was found (%s)",
                    error != cudaSuccess ? cudaGetErrorString(error)
                                         : "no CUDA devices");
    return false;
  }
  if (localSize > count) {
    mrt::writeError(err, errlen,
                    "megatron-rt: %d ranks on this node but only %d GPUs; "
                    "NCCL needs one GPU per rank",
                    localSize, count);
    return false;
  }
  ctx.device = localRank;
  error = cudaSetDevice(ctx.device);
  if (error != cudaSuccess) {
    mrt::writeError(err, errlen, "megatron-rt: cudaSetDevice(%d) failed: %s",
                    ctx.device, cudaGetErrorString(error));
    return false;
  }
  return true;
}

/// selectLocalDevice on every rank, then agreement: a rank without a GPU
/// must not leave the others waiting in the NCCL bootstrap.
bool selectDevice(mrt_context &ctx, char *err, size_t errlen) {
  int ok = selectLocalDevice(ctx, err, errlen) ? 1 : 0, everyone = 0;
  MPI_Allreduce(&ok, &everyone, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (ok && !everyone)
    mrt::writeError(err, errlen,
                    "megatron-rt: another rank found no usable GPU (its "
                    "message comes from that rank)");
  return everyone;
}

void checkNccl(const mrt_context &ctx, const char *what, ncclResult_t result) {
  if (result != ncclSuccess)
    mrt::abortJob(ctx.mesh.worldRank, "NCCL %s failed: %s", what,
                  ncclGetErrorString(result));
}

/// One world communicator from a unique id broadcast over MPI, split into
/// one per mesh axis (ranks of an axis share the other axis's coordinate),
/// and tp's into one per sub-axis (the MPI mesh's colors and ranks).
void createCommunicators(mrt_context &ctx) {
  ncclUniqueId id;
  if (ctx.mesh.worldRank == 0)
    checkNccl(ctx, "ncclGetUniqueId", ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  int worldSize = ctx.mesh.size[MRT_AXIS_DP] * ctx.mesh.size[MRT_AXIS_TP];
  ncclComm_t world;
  checkNccl(ctx, "ncclCommInitRank",
            ncclCommInitRank(&world, worldSize, id, ctx.mesh.worldRank));
  ctx.nccl.assign(ctx.mesh.rank.size(), nullptr);
  checkNccl(ctx, "ncclCommSplit(tp)",
            ncclCommSplit(world, ctx.mesh.rank[MRT_AXIS_DP],
                          ctx.mesh.rank[MRT_AXIS_TP], &ctx.nccl[MRT_AXIS_TP],
                          nullptr));
  checkNccl(ctx, "ncclCommSplit(dp)",
            ncclCommSplit(world, ctx.mesh.rank[MRT_AXIS_TP],
                          ctx.mesh.rank[MRT_AXIS_DP], &ctx.nccl[MRT_AXIS_DP],
                          nullptr));
  checkNccl(ctx, "ncclCommDestroy(world)", ncclCommDestroy(world));
  for (size_t slot = 2; slot < ctx.nccl.size(); ++slot)
    checkNccl(ctx, "ncclCommSplit(tp sub-axis)",
              ncclCommSplit(ctx.nccl[MRT_AXIS_TP], ctx.mesh.color[slot],
                            ctx.mesh.rank[slot], &ctx.nccl[slot], nullptr));
}

bool isDevicePointer(const void *pointer) {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    cudaGetLastError(); // an unregistered host pointer is not an error here
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice ||
         attributes.type == cudaMemoryTypeManaged;
}

/// Runs `enqueue(comm, stream)` on the collective stream, ordered after the
/// work already on the compute stream; returns its ticket.
template <typename Enqueue>
int64_t issue(mrt_context *ctx, int axis, const char *what, Enqueue enqueue) {
  int a = mrt::checkedAxis(&ctx->mesh, axis, what);
  MRT_CUDA_CHECK(cudaEventRecord(ctx->computeReady, ctx->compute));
  MRT_CUDA_CHECK(cudaStreamWaitEvent(ctx->comm, ctx->computeReady, 0));
  checkNccl(*ctx, what, enqueue(ctx->nccl[a], ctx->comm));
  ctx->watchdog->track(what, ctx->comm);
  cudaEvent_t done;
  if (ctx->spareEvents.empty()) {
    MRT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  } else {
    done = ctx->spareEvents.back();
    ctx->spareEvents.pop_back();
  }
  MRT_CUDA_CHECK(cudaEventRecord(done, ctx->comm));
  int64_t ticket = ctx->nextTicket++;
  ctx->issued.emplace(ticket, done);
  return ticket;
}

/// Orders the compute stream's later work after the collective of `ticket`
/// and, the communication stream being in order, every earlier one.
void join(mrt_context *ctx, int64_t ticket) {
  auto waited = ctx->issued.find(ticket);
  if (waited == ctx->issued.end())
    mrt::abortJob(ctx->mesh.worldRank,
                  "collective_wait: ticket %lld was never started or was waited for",
                  static_cast<long long>(ticket));
  MRT_CUDA_CHECK(cudaStreamWaitEvent(ctx->compute, waited->second, 0));
  for (auto it = ctx->issued.begin(); it != std::next(waited);) {
    ctx->spareEvents.push_back(it->second);
    it = ctx->issued.erase(it);
  }
}

/// A collective the compute stream's next work waits for.
template <typename Enqueue>
void collective(mrt_context *ctx, int axis, const char *what,
                Enqueue enqueue) {
  join(ctx, issue(ctx, axis, what, enqueue));
}

ncclRedOp_t ncclOp(const mrt_context &ctx, int op) {
  if (op == MRT_REDUCE_SUM)
    return ncclSum;
  if (op == MRT_REDUCE_MAX)
    return ncclMax;
  mrt::abortJob(ctx.mesh.worldRank, "all_reduce: invalid reduce op %d", op);
}

/// Host buffers (megatron-run's own, never bf16) take the MPI path, which
/// has no bf16; a collective may not mix host and device buffers.
bool onDevice(const mrt_context &ctx, const char *what, const void *in,
              const void *out, ncclDataType_t type) {
  bool device = isDevicePointer(in);
  if (device != isDevicePointer(out))
    mrt::abortJob(ctx.mesh.worldRank,
                  "%s: one buffer is in host and the other in device memory",
                  what);
  if (!device && type == ncclBfloat16)
    mrt::abortJob(ctx.mesh.worldRank,
                  "%s: bf16 buffers must be in device memory", what);
  return device;
}

// The _f32 and _bf16 collectives: `type` is the buffers' element type.

void allReduce(mrt_context *ctx, int axis, void *buf, int64_t n, int op,
               ncclDataType_t type) {
  const char *what = "all_reduce";
  if (!onDevice(*ctx, what, buf, buf, type))
    return mrt::mpiAllReduce(ctx->mesh, axis, static_cast<float *>(buf), n,
                             op);
  ncclRedOp_t reduction = ncclOp(*ctx, op);
  collective(ctx, axis, what, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(buf, buf, static_cast<size_t>(n), type, reduction,
                         comm, stream);
  });
}

void allGather(mrt_context *ctx, int axis, const void *in, void *out,
               int64_t nPerRank, ncclDataType_t type) {
  const char *what = "all_gather";
  if (!onDevice(*ctx, what, in, out, type))
    return mrt::mpiAllGather(ctx->mesh, axis, static_cast<const float *>(in),
                             static_cast<float *>(out), nPerRank);
  collective(ctx, axis, what, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllGather(in, out, static_cast<size_t>(nPerRank), type, comm,
                         stream);
  });
}

void reduceScatter(mrt_context *ctx, int axis, const void *in, void *out,
                   int64_t nPerRank, ncclDataType_t type) {
  const char *what = "reduce_scatter";
  if (!onDevice(*ctx, what, in, out, type))
    return mrt::mpiReduceScatter(ctx->mesh, axis,
                                 static_cast<const float *>(in),
                                 static_cast<float *>(out), nPerRank);
  collective(ctx, axis, what, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclReduceScatter(in, out, static_cast<size_t>(nPerRank), type,
                             ncclSum, comm, stream);
  });
}

} // namespace

const mrt::MpiMesh &mrt::meshOf(const mrt_context *ctx) { return ctx->mesh; }

int mrt::cuda::currentDevice() {
  if (!current)
    mrt::fatal("a CUDA kernel was called before mrt_context_create");
  return current->device;
}

cudaStream_t mrt::cuda::computeStream() {
  if (!current)
    mrt::fatal("a CUDA kernel was called before mrt_context_create");
  return current->compute;
}

extern "C" mrt_context *mrt_context_create(int64_t tp_size,
                                           double collective_timeout_s,
                                           char *err, size_t errlen) {
  if (current) {
    mrt::writeError(err, errlen,
                    "megatron-rt: this process already drives a GPU context");
    return nullptr;
  }
  auto *ctx = new mrt_context;
  if (!mrt::createMpiMesh(tp_size, collective_timeout_s, ctx->mesh, err,
                          errlen)) {
    delete ctx;
    return nullptr;
  }
  if (!selectDevice(*ctx, err, errlen)) {
    mrt::destroyMpiMesh(ctx->mesh);
    delete ctx;
    return nullptr;
  }
  // Kernels take scratch memory with cudaMallocAsync every step; keeping it
  // in the pool instead of returning it to the driver at each
  // synchronisation makes those allocations free after the first step.
  cudaMemPool_t pool;
  MRT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, ctx->device));
  uint64_t keepEverything = UINT64_MAX;
  MRT_CUDA_CHECK(cudaMemPoolSetAttribute(
      pool, cudaMemPoolAttrReleaseThreshold, &keepEverything));
  MRT_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->compute, cudaStreamNonBlocking));
  MRT_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->comm, cudaStreamNonBlocking));
  MRT_CUDA_CHECK(cudaEventCreateWithFlags(&ctx->computeReady,
                                          cudaEventDisableTiming));
  createCommunicators(*ctx);
  ctx->watchdog = new Watchdog(ctx->mesh.worldRank, ctx->device,
                               ctx->nccl.data(),
                               static_cast<int>(ctx->nccl.size()),
                               collective_timeout_s);
  current = ctx;
  return ctx;
}

extern "C" void mrt_context_destroy(mrt_context *ctx) {
  if (!ctx)
    return;
  MRT_CUDA_CHECK(cudaStreamSynchronize(ctx->compute));
  delete ctx->watchdog;
  for (ncclComm_t comm : ctx->nccl)
    ncclCommDestroy(comm);
  cudaEventDestroy(ctx->computeReady);
  for (auto [ticket, event] : ctx->issued)
    cudaEventDestroy(event);
  for (cudaEvent_t event : ctx->spareEvents)
    cudaEventDestroy(event);
  cudaStreamDestroy(ctx->comm);
  cudaStreamDestroy(ctx->compute);
  mrt::destroyMpiMesh(ctx->mesh);
  if (current == ctx)
    current = nullptr;
  delete ctx;
}

extern "C" void mrt_all_reduce_f32(mrt_context *ctx, int axis, float *buf,
                                   int64_t n, int op) {
  allReduce(ctx, axis, buf, n, op, ncclFloat32);
}

extern "C" void mrt_all_reduce_bf16(mrt_context *ctx, int axis, mrt_bf16 *buf,
                                    int64_t n, int op) {
  allReduce(ctx, axis, buf, n, op, ncclBfloat16);
}

namespace {

/// A started collective runs on the communication stream while the host
/// goes on: its buffer cannot be a host one, which MPI would need the host
/// thread for.
void requireDeviceBuffer(mrt_context *ctx, const char *what, void *buf,
                         ncclDataType_t type) {
  if (!onDevice(*ctx, what, buf, buf, type))
    mrt::abortJob(ctx->mesh.worldRank,
                  "%s: a started collective's buffer must be in device memory",
                  what);
}

int64_t allReduceStart(mrt_context *ctx, int axis, void *buf, int64_t n,
                       int op, ncclDataType_t type) {
  const char *what = "all_reduce_start";
  requireDeviceBuffer(ctx, what, buf, type);
  ncclRedOp_t reduction = ncclOp(*ctx, op);
  return issue(ctx, axis, what, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(buf, buf, static_cast<size_t>(n), type, reduction,
                         comm, stream);
  });
}

} // namespace

extern "C" int64_t mrt_all_reduce_start_f32(mrt_context *ctx, int axis,
                                             float *buf, int64_t n, int op) {
  return allReduceStart(ctx, axis, buf, n, op, ncclFloat32);
}

extern "C" int64_t mrt_all_reduce_start_bf16(mrt_context *ctx, int axis,
                                              mrt_bf16 *buf, int64_t n,
                                              int op) {
  return allReduceStart(ctx, axis, buf, n, op, ncclBfloat16);
}

namespace {

int64_t allGatherStart(mrt_context *ctx, int axis, void *buf,
                       int64_t nPerRank, ncclDataType_t type,
                       size_t elementBytes) {
  const char *what = "all_gather_start";
  requireDeviceBuffer(ctx, what, buf, type);
  int64_t rank = ctx->mesh.rank[mrt::checkedAxis(&ctx->mesh, axis, what)];
  const void *mine = static_cast<const char *>(buf) +
                     rank * nPerRank * static_cast<int64_t>(elementBytes);
  return issue(ctx, axis, what, [&](ncclComm_t comm, cudaStream_t stream) {
    // In place: this rank's chunk already at its offset.
    return ncclAllGather(mine, buf, static_cast<size_t>(nPerRank), type, comm,
                         stream);
  });
}

} // namespace

extern "C" int64_t mrt_all_gather_start_f32(mrt_context *ctx, int axis,
                                             float *buf, int64_t n_per_rank) {
  return allGatherStart(ctx, axis, buf, n_per_rank, ncclFloat32,
                        sizeof(float));
}

extern "C" int64_t mrt_all_gather_start_bf16(mrt_context *ctx, int axis,
                                              mrt_bf16 *buf,
                                              int64_t n_per_rank) {
  return allGatherStart(ctx, axis, buf, n_per_rank, ncclBfloat16,
                        sizeof(mrt_bf16));
}

extern "C" int64_t mrt_reduce_scatter_start_f32(mrt_context *ctx, int axis,
                                                 float *buf,
                                                 int64_t n_per_rank) {
  const char *what = "reduce_scatter_start";
  requireDeviceBuffer(ctx, what, buf, ncclFloat32);
  int64_t rank = ctx->mesh.rank[mrt::checkedAxis(&ctx->mesh, axis, what)];
  size_t count = static_cast<size_t>(n_per_rank);
  return issue(ctx, axis, what, [&](ncclComm_t comm, cudaStream_t stream) {
    // In place, NCCL leaves this rank's chunk at its own offset; comm.h
    // promises it at the start of the buffer, one copy on the same stream.
    float *chunk = buf + rank * n_per_rank;
    ncclResult_t result = ncclReduceScatter(buf, chunk, count, ncclFloat32,
                                            ncclSum, comm, stream);
    if (result == ncclSuccess && chunk != buf)
      MRT_CUDA_CHECK(cudaMemcpyAsync(buf, chunk, count * sizeof(float),
                                     cudaMemcpyDeviceToDevice, stream));
    return result;
  });
}

extern "C" void mrt_collective_wait(mrt_context *ctx, int64_t ticket) {
  join(ctx, ticket);
}

extern "C" void mrt_all_gather_f32(mrt_context *ctx, int axis, const float *in,
                                   float *out, int64_t n_per_rank) {
  allGather(ctx, axis, in, out, n_per_rank, ncclFloat32);
}

extern "C" void mrt_all_gather_bf16(mrt_context *ctx, int axis,
                                    const mrt_bf16 *in, mrt_bf16 *out,
                                    int64_t n_per_rank) {
  allGather(ctx, axis, in, out, n_per_rank, ncclBfloat16);
}

extern "C" void mrt_reduce_scatter_f32(mrt_context *ctx, int axis,
                                       const float *in, float *out,
                                       int64_t n_per_rank) {
  reduceScatter(ctx, axis, in, out, n_per_rank, ncclFloat32);
}

extern "C" void mrt_reduce_scatter_bf16(mrt_context *ctx, int axis,
                                        const mrt_bf16 *in, mrt_bf16 *out,
                                        int64_t n_per_rank) {
  reduceScatter(ctx, axis, in, out, n_per_rank, ncclBfloat16);
}

extern "C" void mrt_broadcast_bytes(mrt_context *ctx, int axis, void *buf,
                                    int64_t bytes, int root) {
  const char *what = "broadcast";
  if (!onDevice(*ctx, what, buf, buf, ncclUint8))
    return mrt::mpiBroadcast(ctx->mesh, axis, buf, bytes, root);
  collective(ctx, axis, what, [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(buf, buf, static_cast<size_t>(bytes), ncclUint8, root,
                         comm, stream);
  });
}
