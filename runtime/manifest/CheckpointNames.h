// How a model family's published checkpoints name their tensors: the
// manifest's "checkpoint_names" (the generator states it in the IR) picks
// the mapping from a file's tensor names to the model's parameter names.
// Family knowledge lives here, once per family, and nowhere else in the
// launcher.
#ifndef MEGATRON_RUN_CHECKPOINTNAMES_H
#define MEGATRON_RUN_CHECKPOINTNAMES_H

#include <optional>
#include <string>

namespace mrun {

// The model's name for the file's tensor `fileName`, or std::nullopt for a
// tensor the model has by design no parameter for (a buffer, a tied copy).
using CheckpointNames =
    std::optional<std::string> (*)(const std::string &fileName);

// The mapping of `scheme`: "" (the model's own names),
// MGT_CHECKPOINT_NAMES_HF_GPT2 or MGT_CHECKPOINT_NAMES_HF_LLAMA. Throws std::invalid_argument naming the
// known schemes for any other.
CheckpointNames checkpointNamesFor(const std::string &scheme);

} // namespace mrun

#endif // MEGATRON_RUN_CHECKPOINTNAMES_H
