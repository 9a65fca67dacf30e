//===- OutlineLayers.cpp - one function per distinct layer body -----------===//
//
// A transformer repeats one layer L times with other weights. Lowered as
// written, every copy is converted, bufferized and compiled again, and
// LLVM's cost on the one huge function grows faster than L. Each distinct
// layer body becomes one function instead, called once per layer.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/Utils/LayerLocations.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "megatron/Lowering/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tp-outline-layers"

namespace mlir::megatron {
#define GEN_PASS_DEF_OUTLINELAYERS
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;

namespace {

/// Consecutive ops of one layer and phase, and how they meet the rest of
/// the block.
struct LayerRun {
  SmallVector<Operation *> ops;
  llvm::DenseSet<Operation *> members;
  /// Values defined outside the run that it reads, in first-read order.
  SmallVector<Value> inputs;
  /// Its results the program reads after it (or after another run of its
  /// group, at the same position), in program order.
  SmallVector<Value> outputs;
};

/// The ops of `block` in maximal runs of one #tp.layer and tp.phase each:
/// a layer's forward and backward ops are two bodies.
SmallVector<LayerRun> collectRuns(Block &block) {
  SmallVector<LayerRun> runs;
  std::optional<RunKey> current;
  for (Operation &op : block.without_terminator()) {
    std::optional<RunKey> key = getRunKey(&op);
    if (key && key != current)
      runs.emplace_back();
    if (key) {
      runs.back().ops.push_back(&op);
      runs.back().members.insert(&op);
    }
    current = key;
  }
  return runs;
}

void collectInputs(LayerRun &run) {
  auto isInside = [&](Value value) {
    Operation *def = value.getDefiningOp();
    return def && run.members.contains(def);
  };
  llvm::SetVector<Value> inputs;
  for (Operation *op : run.ops) {
    for (Value operand : op->getOperands())
      if (!isInside(operand))
        inputs.insert(operand);
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op->getRegions(), captured);
    for (Value value : captured)
      if (!isInside(value))
        inputs.insert(value);
  }
  run.inputs = inputs.takeVector();
}

bool isReadOutside(const LayerRun &run, Value result) {
  Block *block = run.ops.front()->getBlock();
  return llvm::any_of(result.getUsers(), [&](Operation *user) {
    return !run.members.contains(block->findAncestorOpInBlock(*user));
  });
}

/// A cheap key that equivalent runs share: the ops' names and result types.
llvm::hash_code shapeKey(const LayerRun &run) {
  llvm::hash_code key = llvm::hash_value(run.inputs.size());
  for (Operation *op : run.ops) {
    key = llvm::hash_combine(key, op->getName().getAsOpaquePointer());
    for (Type type : op->getResultTypes())
      key = llvm::hash_combine(key, type.getAsOpaquePointer());
  }
  return key;
}

/// Whether `b` computes what `a` computes, from its inputs in the same
/// positions.
bool isEquivalent(const LayerRun &a, const LayerRun &b) {
  if (a.ops.size() != b.ops.size() || a.inputs.size() != b.inputs.size())
    return false;
  DenseMap<Value, Value> counterpart;
  for (auto [lhs, rhs] : llvm::zip(a.inputs, b.inputs)) {
    if (lhs.getType() != rhs.getType())
      return false;
    counterpart[lhs] = rhs;
  }
  auto check = [&](Value lhs, Value rhs) {
    return success(counterpart.lookup(lhs) == rhs);
  };
  auto mark = [&](Value lhs, Value rhs) { counterpart[lhs] = rhs; };
  return llvm::all_of(llvm::zip(a.ops, b.ops), [&](auto pair) {
    return OperationEquivalence::isEquivalentTo(
        std::get<0>(pair), std::get<1>(pair), check, mark,
        OperationEquivalence::IgnoreLocations);
  });
}

/// Runs that compute the same, to be one function.
using Group = SmallVector<LayerRun *>;

SmallVector<Group> groupEquivalentRuns(MutableArrayRef<LayerRun> runs) {
  SmallVector<Group> groups;
  DenseMap<llvm::hash_code, SmallVector<unsigned>> byKey;
  for (LayerRun &run : runs) {
    SmallVector<unsigned> &candidates = byKey[shapeKey(run)];
    auto match = llvm::find_if(candidates, [&](unsigned group) {
      return isEquivalent(*groups[group].front(), run);
    });
    if (match != candidates.end()) {
      groups[*match].push_back(&run);
      continue;
    }
    candidates.push_back(groups.size());
    groups.push_back({&run});
  }
  return groups;
}

/// Every run of the group returns the results any of them leaves to the
/// program (the last layer's output is read by the head, the others' by
/// the next layer: the same position).
void collectGroupOutputs(ArrayRef<LayerRun *> group) {
  const LayerRun &prototype = *group.front();
  SmallVector<std::pair<unsigned, unsigned>> positions;
  for (auto [index, op] : llvm::enumerate(prototype.ops))
    for (unsigned result = 0; result < op->getNumResults(); ++result)
      if (llvm::any_of(group, [&](LayerRun *run) {
            return isReadOutside(*run, run->ops[index]->getResult(result));
          }))
        positions.push_back({index, result});
  for (LayerRun *run : group)
    run->outputs = llvm::map_to_vector(positions, [&](auto position) -> Value {
      return run->ops[position.first]->getResult(position.second);
    });
}

/// A collective started in the run and waited for outside it, or the
/// reverse, would have to cross a call: such a run stays in place.
bool leavesCollectivePending(const LayerRun &run) {
  return llvm::any_of(llvm::concat<const Value>(run.inputs, run.outputs),
                      [](Value value) {
                        return isa<tp::PendingType>(value.getType());
                      });
}

/// A private function computing `run`'s outputs from its inputs, before
/// `parent`, named after it, the run's phase and the body's ordinal among
/// that phase's (the bf16 copies of a layer's parameters, then its forward
/// ops): @gpt2_forward_layer1.
func::FuncOp outline(const LayerRun &run, func::FuncOp parent,
                     unsigned ordinal, SymbolTable &symbols) {
  MLIRContext *context = parent.getContext();
  auto type = FunctionType::get(context, ValueRange(run.inputs).getTypes(),
                                ValueRange(run.outputs).getTypes());
  std::string name = (parent.getName() + "_" + tp::getPhase(run.ops.front()) +
                      "_layer" + Twine(ordinal))
                         .str();
  OpBuilder b(context);
  auto function = func::FuncOp::create(b, run.ops.front()->getLoc(), name, type);
  function.setPrivate();
  Block *entry = function.addEntryBlock();
  IRMapping mapping;
  mapping.map(run.inputs, entry->getArguments());
  b.setInsertionPointToStart(entry);
  for (Operation *op : run.ops)
    b.clone(*op, mapping);
  SmallVector<Value> results = llvm::map_to_vector(
      run.outputs, [&](Value output) { return mapping.lookup(output); });
  func::ReturnOp::create(b, parent.getLoc(), results);
  // Renamed if the name is taken. Before its caller: passes that walk the module once in order
  // (drop-equivalent-buffer-results) then see the callee's in-place updates
  // before the caller returns the updated arguments.
  symbols.insert(function, Block::iterator(parent));
  return function;
}

/// A run may read an output of a run already called instead: the next
/// layer reads the last one's, the backward pass the forward's saved
/// activations.
void readReplacements(LayerRun &run, const DenseMap<Value, Value> &replaced) {
  for (Value &input : run.inputs)
    input = replaced.lookup(input) ?: input;
}

/// Calls `callee` in place of `run`; its outputs' uses move to the call
/// (recorded in `replaced`), the run's ops stay for the caller to erase
/// once no run reads them.
void callInstead(const LayerRun &run, func::FuncOp callee,
                 DenseMap<Value, Value> &replaced) {
  OpBuilder b(run.ops.front());
  auto call =
      func::CallOp::create(b, run.ops.front()->getLoc(), callee, run.inputs);
  for (auto [output, result] : llvm::zip(run.outputs, call.getResults())) {
    Value(output).replaceAllUsesWith(result);
    replaced[output] = result;
  }
}

void outlineLayers(func::FuncOp function, SymbolTable &symbols) {
  llvm::StringMap<unsigned> bodiesPerPhase;
  SmallVector<Block *> blocks;
  function.walk([&](Block *block) { blocks.push_back(block); });
  for (Block *block : blocks) {
    SmallVector<LayerRun> runs = collectRuns(*block);
    for (LayerRun &run : runs)
      collectInputs(run);
    DenseMap<Value, Value> replaced;
    SmallVector<LayerRun *> outlined;
    for (Group &group : groupEquivalentRuns(runs)) {
      if (group.size() < 2)
        continue;
      collectGroupOutputs(group);
      if (leavesCollectivePending(*group.front()))
        continue;
      readReplacements(*group.front(), replaced);
      unsigned &ordinal = bodiesPerPhase[tp::getPhase(group.front()->ops.front())];
      func::FuncOp callee =
          outline(*group.front(), function, ordinal++, symbols);
      LLVM_DEBUG(llvm::dbgs() << "@" << callee.getName() << ": "
                              << group.front()->ops.size() << " ops, called "
                              << group.size() << " times\n");
      for (LayerRun *run : group) {
        readReplacements(*run, replaced);
        callInstead(*run, callee, replaced);
        outlined.push_back(run);
      }
    }
    for (LayerRun *run : outlined)
      for (Operation *op : llvm::reverse(run->ops))
        op->erase();
  }
}

struct OutlineLayersPass
    : public megatron::impl::OutlineLayersBase<OutlineLayersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(tp::verifyProgramDialects(module, getArgument())))
      return signalPassFailure();
    SymbolTable symbols(module);
    for (auto function : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (!function.isExternal())
        outlineLayers(function, symbols);
  }
};

} // namespace
