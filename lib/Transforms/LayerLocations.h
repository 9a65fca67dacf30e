//===- LayerLocations.h - which transformer layer an op belongs to -*- C++ -*-===//
//
// Model generators locate ops with NameLocs of their Hugging Face module
// ("h.3.mlp.c_fc"); reports and pictures group ops by layer from them.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_LIB_TRANSFORMS_LAYERLOCATIONS_H
#define MEGATRON_LIB_TRANSFORMS_LAYERLOCATIONS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

#include <optional>

namespace mlir::megatron {

/// The module name of `loc` ("h.3.mlp.c_fc"), or "" when it has none.
inline StringRef getModuleName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().getValue();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (StringRef name = getModuleName(inner); !name.empty())
        return name;
  return "";
}

/// The layer index of a "h.<layer>." module name.
inline std::optional<int64_t> getLayer(StringRef moduleName) {
  if (!moduleName.consume_front("h."))
    return std::nullopt;
  int64_t layer;
  if (moduleName.consumeInteger(10, layer))
    return std::nullopt;
  return layer;
}

} // namespace mlir::megatron

#endif // MEGATRON_LIB_TRANSFORMS_LAYERLOCATIONS_H
