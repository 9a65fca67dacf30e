//===- LayerStacks.cpp - arguments that hold one tensor per layer ---------===//
#include "megatron/Lowering/LayerStacks.h"

#include "megatron/Dialect/TP/IR/TP.h"

#include "llvm/ADT/StringMap.h"

#include <map>

using namespace mlir;
using namespace mlir::tp;

namespace {

/// The layer argument `index` belongs to: its own #tp.layer, or its
/// parameter's (`layerOfName` maps parameter names to layers).
std::optional<int64_t> layerOf(func::FuncOp function, unsigned index,
                               const llvm::StringMap<int64_t> &layerOfName) {
  if (auto layer =
          function.getArgAttrOfType<LayerAttr>(index, TPDialect::kLayerAttrName))
    return layer.getIndex();
  auto param =
      function.getArgAttrOfType<StringAttr>(index, TPDialect::kParamAttrName);
  if (!param)
    return std::nullopt;
  auto it = layerOfName.find(param.getValue());
  if (it == layerOfName.end())
    return std::nullopt;
  return it->second;
}

/// Whether the members may be one buffer of one type, laid out alike.
bool isUniform(func::FuncOp function, ArrayRef<unsigned> members) {
  auto sameAttr = [&](unsigned a, unsigned b, StringRef name) {
    return function.getArgAttr(a, name) == function.getArgAttr(b, name);
  };
  unsigned first = members.front();
  auto type = dyn_cast<RankedTensorType>(function.getArgumentTypes()[first]);
  if (!type || !type.hasStaticShape())
    return false;
  return llvm::all_of(members, [&](unsigned member) {
    return function.getArgumentTypes()[member] == type &&
           sameAttr(first, member, TPDialect::kShardingAttrName) &&
           sameAttr(first, member, TPDialect::kGlobalShapeAttrName) &&
           sameAttr(first, member, TPDialect::kUnpaddedShapeAttrName);
  });
}

} // namespace

SmallVector<SmallVector<unsigned>>
mlir::megatron::layerArgumentStacks(func::FuncOp function) {
  llvm::StringMap<int64_t> layerOfName;
  for (unsigned i = 0; i < function.getNumArguments(); ++i)
    if (auto layer =
            function.getArgAttrOfType<LayerAttr>(i, TPDialect::kLayerAttrName))
      if (auto name =
              function.getArgAttrOfType<StringAttr>(i, TPDialect::kNameAttrName))
        layerOfName[name.getValue()] = layer.getIndex();
  // (role, position in the layer) -> (layer, argument), in argument order.
  std::map<std::pair<std::string, unsigned>,
           SmallVector<std::pair<int64_t, unsigned>>>
      families;
  std::map<std::pair<int64_t, std::string>, unsigned> seenInLayer;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    std::optional<int64_t> layer = layerOf(function, i, layerOfName);
    if (!layer)
      continue;
    std::string role =
        stringifyArgumentRole(getArgumentKind(function, i).role).str();
    unsigned position = seenInLayer[{*layer, role}]++;
    families[{role, position}].push_back({*layer, i});
  }
  SmallVector<SmallVector<unsigned>> stacks;
  for (auto &[key, members] : families) {
    llvm::stable_sort(members);
    SmallVector<unsigned> arguments =
        llvm::map_to_vector(members, [](auto member) { return member.second; });
    bool distinctLayers =
        llvm::adjacent_find(members, [](auto a, auto b) {
          return a.first == b.first;
        }) == members.end();
    if (arguments.size() >= 2 && distinctLayers &&
        isUniform(function, arguments))
      stacks.push_back(std::move(arguments));
  }
  // In the order of their first members, as the arguments are.
  llvm::sort(stacks, [](const auto &a, const auto &b) {
    return a.front() < b.front();
  });
  return stacks;
}
