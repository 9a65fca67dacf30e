// The step loops: mgt_forward per batch (--eval-only) or mgt_train_step per
// batch (training). Rank 0 prints and logs every step.
#ifndef MEGATRON_RUN_STEPLOOP_H
#define MEGATRON_RUN_STEPLOOP_H

#include "Options.h"
#include "Session.h"

#include "megatron_rt/contract.h"

#include <array>
#include <cstdint>
#include <string>

namespace mrun {

// Collective: steps 0..--steps-1 of --eval-only, step s on batch s; with
// --dump-logits the logits of every step streamed into one file, renamed
// into place after the last one. False on every rank if any rank failed.
bool evaluate(Session &s);

// Collective: training steps startStep..--steps-1, step s on batch s; after
// the first one --dump-grads, after each one validation when it is due.
// False on every rank if any rank failed.
bool train(Session &s);

// What step `step` did when its loss or gradient norm is not finite (NaN or
// infinite): the step applied no update, and the run stops or, with
// `skip`, goes on (`skipped` updates so far, this one included). Empty when
// both are finite.
std::string nonFiniteStep(int64_t step, float loss, float gradNorm, bool skip,
                          int64_t skipped = 0);

// The train step's hyperparameters argument for step `step` (0-based): the
// lr of the schedule and the AdamW options, rounded to f32, and the 1-based
// count of updates including this one (the `skipped` steps before it applied
// none).
std::array<float, MGT_HP_COUNT> hyperparameters(const Options &opt,
                                                int64_t step,
                                                int64_t skipped = 0);

} // namespace mrun

#endif // MEGATRON_RUN_STEPLOOP_H
