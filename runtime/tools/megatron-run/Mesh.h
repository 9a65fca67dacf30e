// This rank's place in the mesh: the runtime's context (MPI; for a CUDA step
// also the GPU and NCCL) and the agreement that keeps every rank in step.
#ifndef MEGATRON_RUN_MESH_H
#define MEGATRON_RUN_MESH_H

#include "Manifest.h"
#include "RuntimeApi.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mrun {

class Mesh {
public:
  // Creates the context for the manifest's dp x tp mesh (every rank sees
  // the same world size, so it fails on all or none), whose collectives end
  // the job after `collectiveTimeout` seconds (0: never). On failure returns
  // null and sets `error` to the message (naming `library`).
  static std::unique_ptr<Mesh> create(const RuntimeApi &rt,
                                      const std::string &library,
                                      const Manifest &m,
                                      double collectiveTimeout,
                                      std::string &error);
  Mesh(const Mesh &) = delete;
  Mesh &operator=(const Mesh &) = delete;
  ~Mesh(); // destroys the context (MPI may be finalised)

  mrt_context *context() const { return ctx_; }
  int64_t tpSize() const { return tpSize_; }
  int64_t tpRank() const { return tpRank_; }
  int64_t dpSize() const { return dpSize_; }
  int64_t dpRank() const { return dpRank_; }
  bool rank0() const { return worldRank_ == 0; }
  // Seconds this rank has waited for collectives so far: what the step's
  // communication did not hide behind its compute.
  double exposedCommSeconds() const { return rt_.exposedCommSeconds(ctx_); }

  // Collective agreement over the whole mesh, after anything that can fail
  // on some ranks only: true when no rank failed (`failure` empty on every
  // rank). Otherwise the lowest failing rank reports its failure, naming
  // itself unless every rank failed (then it is said once, as rank 0 sees
  // it), and every rank returns false, so no rank goes on into a collective
  // that another rank will never join.
  bool agree(const std::string &failure) const;

  // Collective: whether `value` (non-negative, below 2^48) is the same on
  // every rank.
  bool sameOnEveryRank(int64_t value) const;

  // out[size * n] = every rank's in[n] along `axis` (MRT_AXIS_TP or
  // MRT_AXIS_DP), in rank order (n fits an int).
  void allGather(int axis, const float *in, float *out, int64_t n) const;
  // Collective: every rank's `value`, in world rank order (d * tp + t).
  std::vector<float> gatherWorld(float value) const;
  // In place: data[n] becomes the element-wise `op` (MRT_REDUCE_SUM or
  // MRT_REDUCE_MAX) over the ranks along `axis`.
  void allReduce(int axis, float *data, int64_t n, int op) const;
  int64_t axisSize(int axis) const {
    return axis == MRT_AXIS_DP ? dpSize_ : tpSize_;
  }

  // Collectives without the deadline while it lives: around megatron-run's
  // own I/O (reading the weights, rank 0 writing a file), where the other
  // ranks wait in an agreement for as long as the file system takes.
  class UnboundedWait {
  public:
    explicit UnboundedWait(const Mesh &mesh) : mesh_(mesh) {
      mesh_.rt_.suspendCollectiveTimeout(mesh_.ctx_, 1);
    }
    ~UnboundedWait() { mesh_.rt_.suspendCollectiveTimeout(mesh_.ctx_, 0); }
    UnboundedWait(const UnboundedWait &) = delete;
    UnboundedWait &operator=(const UnboundedWait &) = delete;

  private:
    const Mesh &mesh_;
  };

private:
  Mesh(const RuntimeApi &rt, mrt_context *ctx);
  const RuntimeApi &rt_;
  mrt_context *ctx_;
  int64_t tpSize_, tpRank_, dpSize_, dpRank_, worldSize_, worldRank_;
};

// The message for a context the runtime could not create (its reason `why`).
std::string meshFailure(const std::string &library, const Manifest &m,
                        const std::string &why);

} // namespace mrun

#endif // MEGATRON_RUN_MESH_H
