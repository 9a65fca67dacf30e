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
#include "megatron/Dialect/TP/Utils/Utils.h"

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

/// The (layer, tp.phase) of an op located in a #tp.layer: consecutive ops
/// of one key are a run, what tp-outline-layers makes one call of, and what
/// tp-overlap-collectives keeps whole.
using RunKey = std::pair<int64_t, StringRef>;
inline std::optional<RunKey> getRunKey(Operation *op) {
  if (std::optional<int64_t> layer = getLayer(op->getLoc()))
    return RunKey{*layer, tp::getPhase(op)};
  return std::nullopt;
}

/// `loc` with its #tp.layer taken off: an op that belongs to no one layer
/// (a bucket of several layers' gradients) then starts no run.
inline Location withoutLayer(Location loc) {
  auto fused = dyn_cast<FusedLoc>(loc);
  if (!fused)
    return loc;
  if (isa_and_nonnull<tp::LayerAttr>(fused.getMetadata()))
    return FusedLoc::get(loc.getContext(), fused.getLocations());
  return FusedLoc::get(
      loc.getContext(),
      llvm::map_to_vector(fused.getLocations(), withoutLayer),
      fused.getMetadata());
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
