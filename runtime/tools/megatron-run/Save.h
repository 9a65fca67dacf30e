// The files megatron-run writes from the step's buffers (layouts: README):
// the --save checkpoint, the --dump-grads gradients and the --dump-logits
// logits. What each holds is computed here; GlobalWriter writes it.
#ifndef MEGATRON_RUN_SAVE_H
#define MEGATRON_RUN_SAVE_H

#include "Checkpoint.h"
#include "GlobalWriter.h"
#include "Manifest.h"
#include "Options.h"
#include "Session.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mrun {

using Metadata = std::map<std::string, std::string>;

// --save: every param under its name, then each param's AdamW state
// ("optimizer.<p>.exp_avg", ".exp_avg_sq"), param by param.
std::vector<SavedTensor> checkpointTensors(const Manifest &m);
// Its __metadata__ after `updates` steps, `skipped` of which applied no
// update: the step, the skipped count and the hyperparameters, numbers in
// their shortest round-trip form.
Metadata checkpointMetadata(const Options &opt, const Manifest &m,
                            int64_t updates, int64_t skipped);

// --dump-grads: each param's gradient under the param's name.
std::vector<SavedTensor> gradientTensors(const Manifest &m);
Metadata gradientMetadata(int64_t step);

// --dump-logits: "logits.<s>" for steps s = 0..steps-1, checkpoint-shaped
// (padding columns dropped).
std::vector<SafetensorsWriter::Tensor> logitsTensors(const Manifest &m,
                                                     int64_t steps);
Metadata logitsMetadata(const Manifest &m, int64_t steps);

// Collective, after the last step: writes --save; rank 0 reports it. True
// on every rank iff the file was written.
bool saveCheckpoint(Session &s);

// Whether --save-every asks for a checkpoint after `updates` updates.
bool periodicSaveDue(const Options &opt, int64_t updates);

// Collective, after `updates` updates: writes --save-dir's checkpoint of
// that step, then drops those beyond --keep-last (only once it is complete:
// a failed write removes nothing). True on every rank iff both worked.
bool savePeriodicCheckpoint(Session &s, int64_t updates);

// Collective, after step `step`: writes --dump-grads. True on every rank iff
// the file was written.
bool dumpGradients(Session &s, int64_t step);

} // namespace mrun

#endif // MEGATRON_RUN_SAVE_H
