#include "Mesh.h"

#include "Report.h"

namespace mrun {

std::unique_ptr<Mesh> Mesh::create(const RuntimeApi &rt,
                                   const std::string &library,
                                   const Manifest &m, double collectiveTimeout,
                                   std::string &error) {
  char why[512];
  mrt_context *ctx =
      rt.contextCreate(m.tp, collectiveTimeout, why, sizeof(why));
  if (!ctx) {
    error = meshFailure(library, m, why);
    return nullptr;
  }
  auto mesh = std::unique_ptr<Mesh>(new Mesh(rt, ctx));
  if (mesh->dpSize() != m.dp) {
    error = meshFailure(library, m,
                        std::to_string(mesh->worldSize_) + " ranks make dp=" +
                            std::to_string(mesh->dpSize()));
    return nullptr;
  }
  return mesh;
}

Mesh::Mesh(const RuntimeApi &rt, mrt_context *ctx)
    : rt_(rt), ctx_(ctx), tpSize_(rt.axisSize(ctx, MRT_AXIS_TP)),
      tpRank_(rt.axisRank(ctx, MRT_AXIS_TP)),
      dpSize_(rt.axisSize(ctx, MRT_AXIS_DP)),
      dpRank_(rt.axisRank(ctx, MRT_AXIS_DP)), worldSize_(tpSize_ * dpSize_),
      worldRank_(rt.worldRank(ctx)) {}

Mesh::~Mesh() { rt_.contextDestroy(ctx_); }

bool Mesh::agree(const std::string &failure) const {
  // One maximum over the mesh answers both questions: each failing rank r
  // contributes world - r (the maximum names the lowest), each rank that
  // did not fail a 1 (the maximum is 0 when every rank failed).
  float flags[2] = {
      failure.empty() ? 0.0f : static_cast<float>(worldSize_ - worldRank_),
      failure.empty() ? 1.0f : 0.0f};
  rt_.allReduce(ctx_, MRT_AXIS_TP, flags, 2, MRT_REDUCE_MAX);
  rt_.allReduce(ctx_, MRT_AXIS_DP, flags, 2, MRT_REDUCE_MAX);
  if (flags[0] == 0.0f)
    return true;
  // What every rank saw is said once, by the first; what some ranks saw,
  // by the lowest of them, naming itself.
  const bool everyRank = flags[1] == 0.0f;
  const int64_t first = worldSize_ - static_cast<int64_t>(flags[0]);
  if (worldRank_ == first)
    report(everyRank || worldSize_ == 1
               ? failure
               : "rank " + std::to_string(worldRank_) + ": " + failure);
  return false;
}

bool Mesh::sameOnEveryRank(int64_t value) const {
  // Floats hold 24-bit integers exactly: the value in two halves, and their
  // negations, whose maxima give the minima.
  const float high = static_cast<float>(value >> 24),
              low = static_cast<float>(value & 0xffffff);
  float extremes[4] = {high, low, -high, -low};
  rt_.allReduce(ctx_, MRT_AXIS_TP, extremes, 4, MRT_REDUCE_MAX);
  rt_.allReduce(ctx_, MRT_AXIS_DP, extremes, 4, MRT_REDUCE_MAX);
  return extremes[0] == -extremes[2] && extremes[1] == -extremes[3];
}

void Mesh::allGather(int axis, const float *in, float *out, int64_t n) const {
  rt_.allGather(ctx_, axis, in, out, n);
}

std::vector<float> Mesh::gatherWorld(float value) const {
  // Over tp, then over dp: rank (d, t)'s value lands at d * tp + t.
  std::vector<float> overTp(static_cast<size_t>(tpSize_));
  allGather(MRT_AXIS_TP, &value, overTp.data(), 1);
  std::vector<float> all(static_cast<size_t>(tpSize_ * dpSize_));
  allGather(MRT_AXIS_DP, overTp.data(), all.data(), tpSize_);
  return all;
}

void Mesh::allReduce(int axis, float *data, int64_t n, int op) const {
  rt_.allReduce(ctx_, axis, data, n, op);
}

std::string meshFailure(const std::string &library, const Manifest &m,
                        const std::string &why) {
  // A CUDA runtime's reasons (no GPU, too few GPUs, ...) speak for
  // themselves; the CPU runtime's are about the MPI world, hence the hint.
  if (m.target == MGT_TARGET_CUDA)
    return library + ": " + why;
  const std::string layout =
      m.dp > 1 ? "dp=" + std::to_string(m.dp) + " x tp=" + std::to_string(m.tp)
               : "tp=" + std::to_string(m.tp);
  return library + " was compiled for " + layout +
         ": launch it as `mpirun -np " + std::to_string(m.dp * m.tp) +
         " megatron-run ...` (" + why + ")";
}

} // namespace mrun
