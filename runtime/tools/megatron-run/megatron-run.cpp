// megatron-run: loads a training step compiled by megatron-mlir (step.so),
// creates the runtime's context (MPI; on a CUDA step also the GPU and NCCL),
// initialises this rank's parameter slices (the model's init rules from a
// seed, or a global safetensors checkpoint), feeds token batches and runs the
// step; or, for a framework's function, feeds its inputs and gathers its
// outputs; or, for a generation step, continues prompts. See README.md. run() is the sequence of phases; each phase lives in
// its own file and reports its own errors.
#include "Buffers.h"
#include "FunctionRun.h"
#include "Generate.h"
#include "Mesh.h"
#include "Options.h"
#include "Report.h"
#include "RuntimeApi.h"
#include "Save.h"
#include "Session.h"
#include "StepLibrary.h"
#include "StepLoop.h"
#include "Threads.h"

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace mrun;

// Each rank's peak resident set so far (getrusage's high-water mark), said
// once by rank 0 in world rank order: what the step's buffers, the
// runtime's caches and the checkpoint I/O took at their largest.
void reportPeakMemory(const Mesh &mesh) {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::vector<float> mib = mesh.gatherWorld(float(usage.ru_maxrss) / 1024.0f);
  if (!mesh.rank0())
    return;
  std::string line = "peak resident memory per rank (MiB):";
  char value[32];
  for (float m : mib) {
    std::snprintf(value, sizeof(value), " %.1f", m);
    line += value;
  }
  report(line);
}

// The exit status of a run: 0, or 1 after an error (reported).
int run(const Options &opt) {
  // Before the runtime's first GEMM starts its threads.
  const CpuShare cpus = shareNodeCpus();
  RuntimeApi rt; // the step library's runtime, resolved through it
  StepLibrary step;
  if (const std::string unusable = openStepLibrary(opt, rt, step);
      !unusable.empty()) {
    reportOnce(unusable, SeenBy::EveryRankOfANode);
    return 1;
  }
  // Allocated by prepare() once the mesh exists. Declared before the mesh so
  // that they outlive its context: destroying that first waits for the
  // step's last work on the device (mrt_device_free needs no context).
  Buffers buffers(rt, step.manifest);
  std::string noMesh;
  const std::unique_ptr<Mesh> mesh =
      Mesh::create(rt, opt.stepLibrary, step.manifest, opt.collectiveTimeout,
                   noMesh);
  if (!mesh) {
    reportOnce(noMesh, SeenBy::EveryRank);
    return 1;
  }
  if (mesh->rank0() && rt.gemmEngines)
    report(std::string("GEMMs ") + rt.gemmEngines());
  Session s(opt, step, *mesh, buffers);
  s.cpus = cpus;
  if (opt.runsFunction())
    return runFunction(s) ? 0 : 1;
  if (opt.generate)
    return generate(s) ? 0 : 1;
  if (!prepare(s))
    return 1;
  bool ok = opt.evalOnly ? evaluate(s)
                         : train(s) && (opt.save.empty() || saveCheckpoint(s));
  if (ok)
    reportPeakMemory(*mesh);
  // The log is closed on every path; its failure matters to a run that
  // succeeded otherwise.
  const std::string logError = s.log.close();
  if (ok && !logError.empty()) {
    report(logError);
    ok = false;
  }
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  // A write past the file-size limit (RLIMIT_FSIZE) then fails with EFBIG,
  // reported naming the checkpoint, instead of killing the rank mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  Options opt;
  try {
    opt = parseOptions(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::invalid_argument &e) {
    reportOnce(std::string(e.what()) + " (see megatron-run --help)",
               SeenBy::EveryRank);
    return 2;
  }
  if (opt.help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  return run(opt);
}
