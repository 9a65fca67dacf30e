// A run once its mesh exists: what the phases after it share, and the phase
// that prepares them (load or init: buffers, weights, data, log).
#ifndef MEGATRON_RUN_SESSION_H
#define MEGATRON_RUN_SESSION_H

#include "Buffers.h"
#include "Console.h"
#include "Manifest.h"
#include "Mesh.h"
#include "Options.h"
#include "Report.h"
#include "StepLibrary.h"
#include "TokenData.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace mrun {

struct Session {
  Session(const Options &opt, const StepLibrary &step, Mesh &mesh,
          Buffers &buffers)
      : opt(opt), step(step), m(step.manifest), mesh(mesh), buffers(buffers) {}

  // Collective: batch `index` of `file` into the tokens and targets buffers
  // (and their device copies). False on every rank if any rank failed.
  bool loadBatch(const TokenFile &file, int64_t index);

  const Options &opt;
  const StepLibrary &step;
  const Manifest &m; // step.manifest
  Mesh &mesh;
  Buffers &buffers;
  std::unique_ptr<TokenFile> data;
  std::unique_ptr<TokenFile> valData; // training with --val-data only
  RunLog log;                         // rank 0 with --log only
  // What rank 0 prints, while the step loop runs (StepLoop.h).
  std::unique_ptr<Console> console;
  // The CPUs this rank's threads share with the node's other ranks.
  CpuShare cpus;
  // The peak FLOP/s of the job's hardware for the MFU (0: not given).
  double peakFlops = 0;
  int64_t startStep = 0; // training: the steps already done (--resume)
  // Training: the steps among them whose non-finite update was skipped.
  int64_t skippedUpdates = 0;
};

// Collective: allocates the buffers, reads this rank's weights (and with
// --resume the AdamW state and step) from the checkpoint or initialises them
// from the seed, opens the data and the log. Any rank may fail; all agree
// before going on. Then uploads the buffers and rank 0 reports what it runs.
// False on every rank if any rank failed.
bool prepare(Session &s);

// Whether the run continues a --save checkpoint (training with --resume).
bool resumes(const Options &opt);

// The updates a --resume checkpoint `file` has done: its metadata's "step",
// which must leave something to do for --steps `steps`. Throws
// std::runtime_error naming the file.
int64_t resumeStep(const std::map<std::string, std::string> &metadata,
                   const std::string &file, int64_t steps);

// The steps among a --resume checkpoint's `step` ones whose update was
// skipped: its metadata's "skipped_updates" (0 when absent). Throws
// std::runtime_error naming the file.
int64_t resumeSkipped(const std::map<std::string, std::string> &metadata,
                      const std::string &file, int64_t step);

// Rank 0's note on what the run does: the model, the weights' source, the
// data and, training, the steps.
std::string runSummary(const Options &opt, const Manifest &m,
                       int64_t rank0Params, int64_t dataTokens,
                       int64_t startStep);

} // namespace mrun

#endif // MEGATRON_RUN_SESSION_H
