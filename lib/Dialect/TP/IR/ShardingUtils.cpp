//===- ShardingUtils.cpp - reading and building shardings per factor ------===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::tp;

ShardingAttr tp::getSharding(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto function =
        dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    if (!function || arg.getOwner() != &function.getFunctionBody().front())
      return {};
    return function.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                                   TPDialect::kShardingAttrName);
  }
  Operation *op = value.getDefiningOp();
  if (op->getNumResults() != 1)
    return {};
  return op->getAttrOfType<ShardingAttr>(TPDialect::kShardingAttrName);
}

void tp::setSharding(Value value, ShardingAttr sharding) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto function = cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    function.setArgAttr(arg.getArgNumber(), TPDialect::kShardingAttrName,
                        sharding);
    return;
  }
  value.getDefiningOp()->setAttr(TPDialect::kShardingAttrName, sharding);
}

static ArrayAttr axesAttr(MLIRContext *context, ArrayRef<StringRef> axes) {
  Builder b(context);
  SmallVector<Attribute> names;
  for (StringRef axis : axes)
    names.push_back(b.getStringAttr(axis));
  return b.getArrayAttr(names);
}

ShardingAttr tp::getReplicated(FlatSymbolRefAttr mesh, Type type) {
  MLIRContext *context = mesh.getContext();
  int64_t rank = cast<RankedTensorType>(type).getRank();
  SmallVector<Attribute> dims(rank, axesAttr(context, {}));
  return ShardingAttr::get(context, mesh, ArrayAttr::get(context, dims),
                           ArrayAttr(), {});
}

ShardingAttr tp::withoutPartial(ShardingAttr sharding) {
  return ShardingAttr::get(sharding.getContext(), sharding.getMesh(),
                           sharding.getDims(), ArrayAttr(),
                           sharding.getSections());
}

SmallVector<StringRef> tp::splittingSubAxes(ArrayRef<StringRef> axes,
                                            MeshOp mesh) {
  SmallVector<StringRef> result;
  for (StringRef axis : mesh.expandAxes(axes))
    if (mesh.getAxisSize(axis).value_or(1) > 1)
      result.push_back(axis);
  return result;
}

bool tp::sameLayout(ShardingAttr a, ShardingAttr b, MeshOp mesh) {
  if (a.getDims().size() != b.getDims().size())
    return false;
  if (splittingSubAxes(a.getPartialAxes(), mesh) !=
      splittingSubAxes(b.getPartialAxes(), mesh))
    return false;
  for (unsigned dim = 0, e = a.getDims().size(); dim < e; ++dim) {
    SmallVector<StringRef> axesA = splittingSubAxes(a.getDimAxes(dim), mesh);
    if (axesA != splittingSubAxes(b.getDimAxes(dim), mesh))
      return false;
    if (!axesA.empty() && a.getDimSections(dim) != b.getDimSections(dim))
      return false;
  }
  return true;
}

std::string tp::describeAxes(ArrayRef<StringRef> axes) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(axes, os, [&](StringRef axis) {
    os << '"' << axis << '"';
  });
  os << "]";
  return text;
}

static bool sameSplit(const FactorShardings::Factor &a,
                      const FactorShardings::Factor &b) {
  return a.axes == b.axes && (a.axes.empty() || a.sections == b.sections);
}

int64_t FactorShardings::shardCount(const Factor &factor) const {
  int64_t shards = 1;
  for (StringRef axis : factor.axes)
    shards *= meshOp ? meshOp.getAxisSize(axis).value_or(1) : 2;
  return shards;
}

bool FactorShardings::shareAxis(const Factor &a, const Factor &b) const {
  auto splitting = [&](const Factor &factor) {
    return meshOp ? splittingSubAxes(factor.axes, meshOp)
                  : SmallVector<StringRef>(factor.axes.begin(),
                                           factor.axes.end());
  };
  SmallVector<StringRef> axesOfB = splitting(b);
  return llvm::any_of(splitting(a), [&](StringRef axis) {
    return llvm::is_contained(axesOfB, axis);
  });
}

/// How strongly a split claims its axes (mergeFactor).
static int claimStrength(const FactorShardings::Factor &factor) {
  if (!factor.fixed)
    return 0;
  return factor.fromResult ? 1 : 2;
}

void FactorShardings::mergeFactor(int64_t index, Factor incoming) {
  for (int64_t other = 0, e = factors.size(); other < e; ++other) {
    Factor &holder = factors[other];
    if (other == index || !holder.known || !shareAxis(incoming, holder))
      continue;
    int strength = claimStrength(incoming), held = claimStrength(holder);
    if (strength == held && strength > 0) {
      fixedConflict = true;
      conflicts.push_back({index, holder, incoming});
      return;
    }
    if (strength <= held) {
      incoming.axes.clear();
      break;
    }
    holder.axes.clear();
  }
  mergeSplit(index, std::move(incoming));
}

void FactorShardings::mergeSplit(int64_t index, Factor incoming) {
  Factor &current = factors[index];
  if (!current.known) {
    current = incoming;
    return;
  }
  if (sameSplit(current, incoming)) {
    if (claimStrength(incoming) > claimStrength(current)) {
      current.fixed = incoming.fixed;
      current.fromResult = incoming.fromResult;
    }
    return;
  }
  int strength = claimStrength(incoming), held = claimStrength(current);
  if (strength == held && strength > 0) {
    fixedConflict = true;
    conflicts.push_back({index, current, incoming});
    return;
  }
  // An annotated operand over an annotated result: the op computes from
  // its operands, and its users get theirs after it.
  if (strength > 0 && held > 0) {
    if (strength > held)
      current = incoming;
    return;
  }
  // A split beats a replicated layout: each rank can slice a replicated
  // value locally, while undoing a split costs an all-gather. A user
  // annotation beats an inferred one of the same kind.
  int64_t incomingShards = shardCount(incoming),
          currentShards = shardCount(current);
  bool incomingWins = incomingShards > currentShards ||
                      (incomingShards == currentShards && incoming.fixed &&
                       !current.fixed);
  if (incomingWins) {
    conflicts.push_back({index, incoming, current});
    current = incoming;
  } else {
    conflicts.push_back({index, current, incoming});
  }
}

void FactorShardings::mergeCompound(const ShardingRule::Dim &dim,
                                    ArrayRef<StringRef> axes, bool fixed,
                                    bool isResult) {
  SmallVector<StringRef> subAxes =
      meshOp ? meshOp.expandAxes(axes) : SmallVector<StringRef>(axes);
  Factor major, minor;
  major.known = minor.known = true;
  major.fixed = minor.fixed = fixed;
  major.fromResult = minor.fromResult = isResult;
  int64_t majorShards = 1;
  for (StringRef axis : subAxes) {
    int64_t size = meshOp ? meshOp.getAxisSize(axis).value_or(1) : 1;
    if (minor.axes.empty() && dim.majorSize % (majorShards * size) == 0) {
      major.axes.push_back(axis);
      majorShards *= size;
    } else {
      minor.axes.push_back(axis);
    }
  }
  auto canonical = [&](Factor factor) {
    if (meshOp)
      factor.axes.assign(meshOp.canonicalAxes(factor.axes));
    return factor;
  };
  mergeFactor(dim.factor, canonical(major));
  mergeFactor(dim.minor, canonical(minor));
}

void FactorShardings::merge(const ShardingRule::TensorDims &dims,
                            ShardingAttr sharding, bool fixed,
                            bool isResult) {
  for (auto [index, dim] : llvm::enumerate(dims)) {
    SmallVector<StringRef> axes = sharding.getDimAxes(index);
    if (dim.factor == ShardingRule::kWhole)
      continue;
    if (dim.minor != ShardingRule::kWhole) {
      mergeCompound(dim, axes, fixed, isResult);
      continue;
    }
    Factor factor;
    factor.known = true;
    factor.fixed = fixed;
    factor.fromResult = isResult;
    if (meshOp)
      axes = meshOp.canonicalAxes(axes);
    factor.axes.assign(axes.begin(), axes.end());
    int64_t sections = sharding.getDimSections(index);
    if (!axes.empty()) {
      // A section count the op does not expect (a block split of attention's
      // fused qkv) cannot be expressed per factor: the tensor is resharded.
      if (sections % dim.sections != 0)
        continue;
      factor.sections = sections / dim.sections;
    }
    mergeFactor(dim.factor, factor);
  }
  if (!isResult || rule.consumesPartial)
    return;
  // A result's pending sums belong to the op's one reduction that leaves
  // them; where several could (the tokens of a loss), the operands say.
  SmallVector<int64_t> partialFactors;
  for (int64_t index = 0, e = rule.isReduction.size(); index < e; ++index)
    if (rule.leavesPartial(index))
      partialFactors.push_back(index);
  if (partialFactors.size() != 1)
    return;
  SmallVector<StringRef> partial = sharding.getPartialAxes();
  // A whole result is what its users want: a g after the op gives it them
  // whatever the op leaves pending.
  if (partial.empty())
    return;
  for (int64_t index : partialFactors) {
    Factor factor;
    factor.known = true;
    factor.fixed = fixed;
    factor.fromResult = true;
    factor.axes.assign(partial.begin(), partial.end());
    mergeFactor(index, factor);
  }
}

bool FactorShardings::determines(const ShardingRule::TensorDims &dims,
                                 bool isResult) const {
  for (const ShardingRule::Dim &dim : dims)
    if ((dim.factor != ShardingRule::kWhole && !factors[dim.factor].known) ||
        (dim.minor != ShardingRule::kWhole && !factors[dim.minor].known))
      return false;
  if (isResult)
    for (int64_t index = 0, e = rule.isReduction.size(); index < e; ++index)
      if (rule.leavesPartial(index) && !factors[index].known)
        return false;
  return true;
}

ShardingAttr FactorShardings::build(FlatSymbolRefAttr mesh,
                                    const ShardingRule::TensorDims &dims,
                                    bool isResult) const {
  MLIRContext *context = mesh.getContext();
  SmallVector<Attribute> dimAxes;
  SmallVector<int64_t> sections;
  bool anySections = false;
  for (const ShardingRule::Dim &dim : dims) {
    if (dim.factor == ShardingRule::kWhole || !factors[dim.factor].known) {
      dimAxes.push_back(axesAttr(context, {}));
      sections.push_back(1);
      continue;
    }
    const Factor &factor = factors[dim.factor];
    SmallVector<StringRef> axes(factor.axes.begin(), factor.axes.end());
    if (dim.minor != ShardingRule::kWhole && factors[dim.minor].known)
      axes.append(factors[dim.minor].axes);
    if (meshOp)
      axes = meshOp.canonicalAxes(meshOp.expandAxes(axes));
    dimAxes.push_back(axesAttr(context, axes));
    int64_t count = axes.empty() ? 1 : factor.sections * dim.sections;
    sections.push_back(count);
    anySections |= count != 1;
  }
  SmallVector<StringRef> partial;
  if (isResult)
    for (int64_t index = 0, e = rule.isReduction.size(); index < e; ++index)
      if (rule.leavesPartial(index) && factors[index].known)
        partial.append(factors[index].axes.begin(), factors[index].axes.end());
  return ShardingAttr::get(
      context, mesh, ArrayAttr::get(context, dimAxes),
      partial.empty() ? ArrayAttr() : axesAttr(context, partial),
      anySections ? ArrayRef<int64_t>(sections) : ArrayRef<int64_t>());
}
