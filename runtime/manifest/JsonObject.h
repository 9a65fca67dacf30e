// The manifest and a checkpoint's header are both one JSON object.
#ifndef MEGATRON_RUN_JSONOBJECT_H
#define MEGATRON_RUN_JSONOBJECT_H

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace mrun {

// `text` as a JSON object, or nullopt with `why` set to "not valid JSON: ..."
// or "not a JSON object".
std::optional<nlohmann::json> parseJsonObject(const std::string &text,
                                              std::string &why);

} // namespace mrun

#endif // MEGATRON_RUN_JSONOBJECT_H
