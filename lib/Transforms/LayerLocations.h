//===- LayerLocations.h - which transformer layer an op belongs to -*- C++ -*-===//
//
// Model generators locate ops with NameLocs of their module ("h.3.mlp.c_fc")
// and wrap the ops of a repeated layer in a FusedLoc whose metadata is its
// #tp.layer; reports and pictures group ops by layer from that.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_LIB_TRANSFORMS_LAYERLOCATIONS_H
#define MEGATRON_LIB_TRANSFORMS_LAYERLOCATIONS_H

#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

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

/// The index of the #tp.layer `loc` lies in, if any.
inline std::optional<int64_t> getLayer(Location loc) {
  std::optional<int64_t> layer;
  loc->walk([&](Location inner) {
    if (auto fused = dyn_cast<FusedLoc>(inner))
      if (auto attr = dyn_cast_or_null<tp::LayerAttr>(fused.getMetadata())) {
        layer = attr.getIndex();
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return layer;
}

/// `loc` in the layer of the parameter `arg` (its #tp.layer argument
/// attribute), if it has one: what a pass builds per parameter (its AdamW
/// update, its bf16 copy) then groups with that layer's ops, in reports and
/// in tp-outline-layers' runs.
inline Location inLayerOf(BlockArgument arg, Location loc) {
  auto function = cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
  auto layer = function.getArgAttrOfType<tp::LayerAttr>(
      arg.getArgNumber(), tp::TPDialect::kLayerAttrName);
  return layer ? FusedLoc::get(loc.getContext(), {loc}, layer) : loc;
}

} // namespace mlir::megatron

#endif // MEGATRON_LIB_TRANSFORMS_LAYERLOCATIONS_H
