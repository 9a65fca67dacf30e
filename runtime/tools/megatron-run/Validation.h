// Validation during training (--val-data): the mean mgt_forward loss over
// the first --val-steps batches of the validation file.
#ifndef MEGATRON_RUN_VALIDATION_H
#define MEGATRON_RUN_VALIDATION_H

#include "Options.h"
#include "Session.h"

#include <cstdint>
#include <functional>
#include <optional>

namespace mrun {

// Whether to validate after `updates` updates: every --val-every K updates
// (K > 0) and always after the last step.
bool validationDue(const Options &opt, int64_t updates);

// The mean of lossOf(b) over batches b = 0..batches-1, summed in double and
// rounded to f32; nullopt as soon as lossOf fails (returns nullopt).
std::optional<float>
meanLoss(int64_t batches,
         const std::function<std::optional<float>(int64_t)> &lossOf);

// Collective: validates the weights after `updates` updates; rank 0 prints
// and logs the loss. It overwrites the batch buffers, which is safe because
// every training step loads its own batch. False on every rank if any rank
// failed.
bool validate(Session &s, int64_t updates);

} // namespace mrun

#endif // MEGATRON_RUN_VALIDATION_H
