//===- StackLayerArguments.cpp - one argument per per-layer family --------===//
//
// The step takes a separate buffer for every layer's parameter, moment and
// master weight, so a loop over the layers could not index them: the
// unrolled layers then cost compile time in proportion to the depth. The
// manifest declares each family a stack, which the host allocates as one
// buffer; here each entry takes the stack as one argument.
//
//===----------------------------------------------------------------------===//
#include "megatron/Lowering/LayerStacks.h"

#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron/Lowering/Passes.h"
#include "megatron/Lowering/StackSlices.h"
#include "megatron/Target/StepLibrary.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_STACKLAYERARGUMENTS
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

namespace {

/// Where each old argument went: the new argument, and for a member its
/// slot in that stack.
struct ArgumentPlace {
  unsigned newIndex;
  std::optional<int64_t> slot;
};

/// The first member's name and role: its shape and sharding are a
/// member's, not the stack's.
DictionaryAttr stackAttrs(func::FuncOp function, unsigned first) {
  NamedAttrList attrs;
  for (StringRef name : {TPDialect::kNameAttrName, TPDialect::kRoleAttrName})
    if (Attribute attr = function.getArgAttr(first, name))
      attrs.set(name, attr);
  return attrs.getDictionary(function.getContext());
}

/// Rewrites `function`'s signature with one argument per stack, at the
/// first member's position; returns each old argument's place.
SmallVector<ArgumentPlace>
stackArguments(func::FuncOp function,
               ArrayRef<SmallVector<unsigned>> stacks) {
  unsigned count = function.getNumArguments();
  DenseMap<unsigned, std::pair<unsigned, int64_t>> member; // -> (stack, k)
  for (auto [s, stack] : llvm::enumerate(stacks))
    for (auto [k, arg] : llvm::enumerate(stack))
      member[arg] = {s, k};
  SmallVector<ArgumentPlace> places(count);
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
  SmallVector<Location> locs;
  SmallVector<unsigned> stackIndex(stacks.size());
  Block &old = function.front();
  for (unsigned i = 0; i < count; ++i) {
    auto it = member.find(i);
    if (it == member.end()) {
      places[i] = {static_cast<unsigned>(types.size()), std::nullopt};
    } else {
      auto [s, k] = it->second;
      if (k == 0) {
        stackIndex[s] = types.size();
        auto memberType = cast<RankedTensorType>(old.getArgument(i).getType());
        types.push_back(getStackType(memberType, stacks[s].size()));
        attrs.push_back(stackAttrs(function, i));
        locs.push_back(old.getArgument(i).getLoc());
        places[i] = {stackIndex[s], 0};
        continue;
      }
      places[i] = {stackIndex[s], k};
      continue;
    }
    types.push_back(old.getArgument(i).getType());
    attrs.push_back(function.getArgAttrDict(i));
    locs.push_back(old.getArgument(i).getLoc());
  }
  auto *block = new Block();
  block->addArguments(types, locs);
  function.getBody().push_front(block);
  OpBuilder b = OpBuilder::atBlockBegin(block);
  for (unsigned i = 0; i < count; ++i) {
    BlockArgument arg = old.getArgument(i);
    Value replacement = block->getArgument(places[i].newIndex);
    if (places[i].slot)
      replacement = extractMember(b, arg.getLoc(), replacement,
                                  b.getIndexAttr(*places[i].slot));
    arg.replaceAllUsesWith(replacement);
  }
  block->getOperations().splice(block->end(), old.getOperations());
  old.erase();
  function.setType(FunctionType::get(function.getContext(), types,
                                     function.getResultTypes()));
  function.setAllArgAttrs(attrs);
  return places;
}

/// The results updating members of a stack become one result updating the
/// stack: the updated members inserted into it. Other results' tp.updates
/// follow their argument.
void stackUpdates(func::FuncOp function, ArrayRef<ArgumentPlace> places) {
  auto ret = cast<func::ReturnOp>(function.front().getTerminator());
  OpBuilder b(ret);
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  DenseMap<unsigned, unsigned> stackResult; // new argument -> result
  for (auto [r, value] : llvm::enumerate(ret.getOperands())) {
    DictionaryAttr attrs = function.getResultAttrDict(r);
    auto updates =
        function.getResultAttrOfType<IntegerAttr>(r, TPDialect::kUpdatesAttrName);
    if (!updates) {
      results.push_back(value);
      resultAttrs.push_back(attrs);
      continue;
    }
    const ArgumentPlace &place = places[updates.getInt()];
    NamedAttrList renumbered(attrs);
    renumbered.set(TPDialect::kUpdatesAttrName,
                   b.getI64IntegerAttr(place.newIndex));
    if (!place.slot) {
      results.push_back(value);
      resultAttrs.push_back(renumbered.getDictionary(b.getContext()));
      continue;
    }
    auto [it, added] = stackResult.try_emplace(place.newIndex, results.size());
    if (added) {
      results.push_back(function.getArgument(place.newIndex));
      resultAttrs.push_back(renumbered.getDictionary(b.getContext()));
    }
    results[it->second] = insertMember(b, ret.getLoc(), value,
                                       results[it->second],
                                       b.getIndexAttr(*place.slot));
  }
  ret->setOperands(results);
  function.setType(FunctionType::get(function.getContext(),
                                     function.getArgumentTypes(),
                                     ValueRange(results).getTypes()));
  function.setAllResultAttrs(resultAttrs);
}

struct StackLayerArgumentsPass
    : public megatron::impl::StackLayerArgumentsBase<StackLayerArgumentsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Without a manifest no host allocates stacks: the arguments stay.
    if (!module->hasAttr(TPDialect::kStepAttrName))
      return;
    FailureOr<StepRecord> record = readStepRecord(module);
    if (failed(record))
      return signalPassFailure();
    for (const StepEntry &entry : record->entries) {
      auto function = module.lookupSymbol<func::FuncOp>(entry.function);
      if (!function || function.isExternal()) {
        module.emitError("the step's entry '")
            << entry.function << "' is not a function of the module";
        return signalPassFailure();
      }
      SmallVector<SmallVector<unsigned>> stacks = layerArgumentStacks(function);
      if (stacks.empty())
        continue;
      SmallVector<ArgumentPlace> places = stackArguments(function, stacks);
      // A stack is passed as its first member's buffer.
      SmallVector<int32_t> argIndices(function.getNumArguments());
      for (auto [old, place] : llvm::enumerate(places))
        if (!place.slot || *place.slot == 0)
          argIndices[place.newIndex] = entry.argIndices[old];
      stackUpdates(function, places);
      setEntryArguments(module, entry.function, argIndices);
    }
  }
};

} // namespace
