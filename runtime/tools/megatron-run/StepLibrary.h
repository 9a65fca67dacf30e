// The step library (step.so): its entry points, the runtime it links and its
// manifest, checked against what the options ask of it. All of this happens
// before the mesh exists and comes out the same on every rank, so an error
// needs no agreement: every rank reports it and exits.
#ifndef MEGATRON_RUN_STEPLIBRARY_H
#define MEGATRON_RUN_STEPLIBRARY_H

#include "Manifest.h"
#include "Options.h"
#include "RuntimeApi.h"

#include "megatron_rt/contract.h"

#include <string>

namespace mrun {

struct StepLibrary {
  Manifest manifest;
  mgt_forward_fn forward = nullptr;
  mgt_train_step_fn trainStep = nullptr; // null: compiled without --train
  mgt_function_fn function = nullptr;    // a framework's function's library
  // A generation library's: the prompt's chunk, one new token.
  mgt_function_fn prefill = nullptr, decode = nullptr;
};

// dlopens opt.stepLibrary (kept loaded for the whole run), fills `step` and
// resolves `rt` through it. Returns "" or the error message.
std::string openStepLibrary(const Options &opt, RuntimeApi &rt,
                            StepLibrary &step);

// The message for a library dlopen refused with `dlError`: a CUDA step on a
// machine without the NVIDIA driver is named as such.
std::string loadFailure(const std::string &library, const std::string &dlError);

// Why `step` cannot do what `opt` asks ("" when it can): training needs the
// train step, --dump-grads gradient outputs, --dump-logits a logits output,
// device arguments a runtime with device memory; a function's library runs
// with --entry naming its function, a model's without.
std::string capabilityError(const Options &opt, const StepLibrary &step,
                            bool runtimeHasDeviceMemory);

} // namespace mrun

#endif // MEGATRON_RUN_STEPLIBRARY_H
