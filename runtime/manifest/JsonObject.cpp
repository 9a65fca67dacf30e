#include "JsonObject.h"

namespace mrun {

std::optional<nlohmann::json> parseJsonObject(const std::string &text,
                                              std::string &why) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception &e) {
    why = std::string("not valid JSON: ") + e.what();
    return std::nullopt;
  }
  if (!value.is_object()) {
    why = "not a JSON object";
    return std::nullopt;
  }
  return value;
}

} // namespace mrun
