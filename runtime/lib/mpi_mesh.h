// Internal: the (dp, tp) mesh over MPI that both runtimes' contexts hold.
// The CPU runtime runs its collectives here; the CUDA runtime bootstraps
// NCCL over it and runs here the collectives on host buffers (megatron-run's
// agreement on errors and checkpoint gathering).
#ifndef MEGATRON_RT_LIB_MPI_MESH_H
#define MEGATRON_RT_LIB_MPI_MESH_H

#include "collective_queue.h"
#include "megatron_rt/comm.h"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace mrt {

class CollectiveWatch;

struct MpiMesh {
  int worldRank;
  // Per axis slot: MRT_AXIS_DP, MRT_AXIS_TP, then tp's sub-axes, whose ids
  // (MRT_AXIS_TP_SUB) subAxisIds holds in slot order. A sub-axis's group is
  // the tp ranks of one `color`.
  std::vector<int> rank, size, color;
  std::vector<int> subAxisIds;
  std::vector<MPI_Comm> comm;
  // Ends the job when a collective outlasts the timeout (null: no limit).
  std::shared_ptr<CollectiveWatch> watch;
  // Every collective runs through it, in the order this rank issues them.
  std::shared_ptr<CollectiveQueue> queue;
};

/// Initialises MPI if needed and splits the world into the mesh, whose
/// collectives may take `timeoutSeconds` each (0: no limit); on failure
/// writes the reason into err and returns false.
bool createMpiMesh(int64_t tpSize, double timeoutSeconds, MpiMesh &mesh,
                   char *err, size_t errlen);

/// Lifts (or restores) the mesh's collective timeout.
void suspendCollectiveTimeout(const MpiMesh &mesh, bool suspended);

/// Frees the communicators; finalises MPI when this library initialised it
/// and no mesh is left.
void destroyMpiMesh(MpiMesh &mesh);

void writeError(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Aborting the whole job, rather than returning, guarantees that the other
// ranks do not wait forever in a collective this rank will never join.
[[noreturn]] void abortJob(int worldRank, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/// The slot of axis id `axis` (MRT_AXIS_DP, MRT_AXIS_TP or a sub-axis of
/// tp); ends the job on an id the mesh has no communicator for.
int checkedAxis(const MpiMesh *mesh, int axis, const char *what);
int checkedCount(const MpiMesh *mesh, int64_t n, const char *what);

// The collectives of comm.h on host buffers.
void mpiAllReduce(const MpiMesh &mesh, int axis, float *buf, int64_t n, int op);
void mpiAllGather(const MpiMesh &mesh, int axis, const float *in, float *out,
                  int64_t nPerRank);
void mpiReduceScatter(const MpiMesh &mesh, int axis, const float *in,
                      float *out, int64_t nPerRank);
void mpiBroadcast(const MpiMesh &mesh, int axis, void *buf, int64_t bytes,
                  int root);

/// comm.h's nonblocking all-reduce: buf[n] is reduced in place behind
/// every earlier collective, then `then` runs (a bf16 sum narrows its fp32
/// staging there); mpiWait(ticket) returns once both are done.
int64_t mpiAllReduceStart(const MpiMesh &mesh, int axis, float *buf, int64_t n,
                          int op, std::function<void()> then = {});
/// comm.h's nonblocking reduce-scatter, in place: buf[size * nPerRank] is
/// summed behind every earlier collective, this rank's chunk left in
/// buf[0, nPerRank).
int64_t mpiReduceScatterStart(const MpiMesh &mesh, int axis, float *buf,
                              int64_t nPerRank);
/// comm.h's nonblocking all-gather, in place: buf holds the axis's ranks'
/// chunks of bytesPerRank bytes in rank order, this rank's filled in.
int64_t mpiAllGatherStart(const MpiMesh &mesh, int axis, void *buf,
                          int64_t bytesPerRank);
void mpiWait(const MpiMesh &mesh, int64_t ticket);

} // namespace mrt

#endif // MEGATRON_RT_LIB_MPI_MESH_H
