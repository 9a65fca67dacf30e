//===- RollLayers.cpp - a loop over the layers instead of one call each ---===//
//
// tp-outline-layers compiles each distinct layer body once, but its caller
// still calls it once per layer, passes each layer's arguments and
// allocates what each layer saves: the caller, and with it the compile
// time, grows with the depth. With the layers' arguments stacked
// (tp-stack-layer-arguments), consecutive calls that differ only in which
// member of a stack they read, and in reading the previous call's result,
// are one loop. The function the loop calls takes whole stacks and slots,
// so every buffer it receives is a whole buffer: a member passed as a view
// would not match the callee's contiguous argument, and bufferization would
// copy it.
//
//===----------------------------------------------------------------------===//
#include "megatron/Lowering/Passes.h"
#include "megatron/Lowering/StackSlices.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_ROLLLAYERS
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;

namespace {

/// How the calls of a run pass one operand.
struct OperandPattern {
  enum Kind { Same, Member, Carried, Progression } kind;
  /// Same: the value; Member: the stack.
  Value value;
  /// Member: call i reads slot start + i * step. Progression: call i
  /// passes the index start + i * step (a layer's dropout stream).
  int64_t start = 0, step = 0;
  /// Carried: the result of the previous call it is.
  unsigned result = 0;
};

/// What the program keeps of one result of the calls.
struct ResultPattern {
  /// The next call reads it.
  bool carried = false;
  /// None: nothing after the run reads it; Last: only the last call's is
  /// read; Every: several calls' are (a stack the loop fills); Chain: each
  /// is written into one stack at the member slots, into `init` first.
  enum Use { None, Last, Every, Chain } use = None;
  Value init;
  int64_t start = 0, step = 0;
  /// Chain: the operand that reads the members the chain writes (an update
  /// in place), if one does.
  std::optional<unsigned> readFrom;
  /// Chain: the inserts, one per call.
  SmallVector<tensor::InsertSliceOp> inserts;
};

/// Consecutive calls of one function, and how they pass and keep values.
struct Run {
  SmallVector<func::CallOp> calls;
  SmallVector<OperandPattern> operands;
  SmallVector<ResultPattern> results;
  llvm::DenseSet<Operation *> members;
};

/// `slots` as start + i * step with a step of -1, 0 (one call) or 1.
std::optional<std::pair<int64_t, int64_t>>
progression(ArrayRef<int64_t> slots) {
  if (slots.empty())
    return std::nullopt;
  int64_t step = slots.size() > 1 ? slots[1] - slots[0] : 0;
  if (slots.size() > 1 && step != 1 && step != -1)
    return std::nullopt;
  for (auto [i, slot] : llvm::enumerate(slots))
    if (slot != slots[0] + static_cast<int64_t>(i) * step)
      return std::nullopt;
  return std::make_pair(slots[0], step);
}

/// Operand j of `calls` as index constants start + i * step.
std::optional<std::pair<int64_t, int64_t>>
constantProgression(ArrayRef<func::CallOp> calls, unsigned j) {
  SmallVector<int64_t> values;
  for (func::CallOp call : calls) {
    APInt value;
    if (!call.getOperand(j).getType().isIndex() ||
        !matchPattern(call.getOperand(j), m_ConstantInt(&value)))
      return std::nullopt;
    values.push_back(value.getSExtValue());
  }
  int64_t step = values.size() > 1 ? values[1] - values[0] : 0;
  for (auto [i, value] : llvm::enumerate(values))
    if (value != values[0] + static_cast<int64_t>(i) * step)
      return std::nullopt;
  return std::make_pair(values[0], step);
}

/// How `calls` pass operand j: a stack's members (first, so that one call
/// reading a member reads it from the stack), one value, or the previous
/// call's result.
std::optional<OperandPattern> classifyOperand(ArrayRef<func::CallOp> calls,
                                              unsigned j) {
  Value first = func::CallOp(calls[0]).getOperand(j);
  SmallVector<int64_t> slots;
  Value stack;
  for (func::CallOp call : calls) {
    std::optional<MemberRead> read = matchMemberRead(call.getOperand(j));
    if (!read || (stack && read->stack != stack))
      break;
    stack = read->stack;
    slots.push_back(read->slot);
  }
  if (slots.size() == calls.size())
    if (auto slotsOf = progression(slots))
      return OperandPattern{OperandPattern::Member, stack, slotsOf->first,
                            slotsOf->second};
  if (llvm::all_of(calls, [&](func::CallOp call) {
        return call.getOperand(j) == first;
      }))
    return OperandPattern{OperandPattern::Same, first};
  if (std::optional<std::pair<int64_t, int64_t>> indices =
          constantProgression(calls, j))
    return OperandPattern{OperandPattern::Progression, Value(),
                          indices->first, indices->second};
  auto previous = dyn_cast<OpResult>(func::CallOp(calls[1]).getOperand(j));
  if (!previous || previous.getOwner() != calls[0])
    return std::nullopt;
  for (unsigned i = 1; i < calls.size(); ++i)
    if (func::CallOp(calls[i]).getOperand(j) !=
        func::CallOp(calls[i - 1]).getResult(previous.getResultNumber()))
      return std::nullopt;
  return OperandPattern{OperandPattern::Carried, Value(), 0, 0,
                        previous.getResultNumber()};
}

std::optional<SmallVector<OperandPattern>>
classifyOperands(ArrayRef<func::CallOp> calls) {
  SmallVector<OperandPattern> patterns;
  for (unsigned j = 0; j < func::CallOp(calls[0]).getNumOperands(); ++j) {
    std::optional<OperandPattern> pattern = classifyOperand(calls, j);
    if (!pattern)
      return std::nullopt;
    patterns.push_back(*pattern);
  }
  return patterns;
}

/// Whether `use` is call i+1 of the run reading call i's result as the
/// operand it carries.
bool isCarriedUse(const Run &run, OpOperand &use) {
  if (!run.members.contains(use.getOwner()))
    return false;
  const OperandPattern &pattern = run.operands[use.getOperandNumber()];
  return pattern.kind == OperandPattern::Carried &&
         pattern.result == cast<OpResult>(use.get()).getResultNumber();
}

/// The uses of call i's result r that the run does not consume itself.
SmallVector<OpOperand *> usesAfter(const Run &run, unsigned i, unsigned r) {
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : func::CallOp(run.calls[i]).getResult(r).getUses())
    if (!isCarriedUse(run, use))
      uses.push_back(&use);
  return uses;
}

/// A stack a rolled run wrote members of: what it was before, and the
/// slots written.
struct Written {
  Value from;
  SmallVector<int64_t> slots;
};
using WrittenStacks = DenseMap<Value, Written>;

/// The value `init` was written from: the stack under its member writes
/// (inserts, and runs rolled before), with the slots they wrote.
Value chainRoot(Value init, const WrittenStacks &rolled,
                SmallVectorImpl<int64_t> &written) {
  while (true) {
    if (auto insert = init.getDefiningOp<tensor::InsertSliceOp>()) {
      std::optional<int64_t> slot = matchMemberWrite(insert);
      if (!slot)
        return init;
      written.push_back(*slot);
      init = insert.getDest();
      continue;
    }
    auto it = rolled.find(init);
    if (it == rolled.end())
      return init;
    llvm::append_range(written, it->second.slots);
    init = it->second.from;
  }
}

/// Result r as a chain: call i's result is only written into the stack
/// the previous call's was written into, at the member slots.
bool matchChain(Run &run, unsigned r, const WrittenStacks &rolled,
                ResultPattern &pattern) {
  SmallVector<int64_t> slots;
  SmallVector<tensor::InsertSliceOp> inserts;
  for (auto [i, call] : llvm::enumerate(run.calls)) {
    Value result = call.getResult(r);
    if (!result.hasOneUse())
      return false;
    auto insert = dyn_cast<tensor::InsertSliceOp>(*result.getUsers().begin());
    if (!insert || insert.getSource() != result ||
        insert->getBlock() != call->getBlock())
      return false;
    std::optional<int64_t> slot = matchMemberWrite(insert);
    if (!slot || (i > 0 && (insert.getDest() != inserts.back().getResult() ||
                            !inserts.back().getResult().hasOneUse())))
      return false;
    slots.push_back(*slot);
    inserts.push_back(insert);
  }
  std::optional<std::pair<int64_t, int64_t>> slotsOf = progression(slots);
  Value init = inserts.front().getDest();
  Operation *initDef = init.getDefiningOp();
  if (!slotsOf || (initDef && (initDef->getBlock() != run.calls[0]->getBlock() ||
                               !initDef->isBeforeInBlock(run.calls[0]))))
    return false;
  pattern.use = ResultPattern::Chain;
  pattern.init = init;
  pattern.start = slotsOf->first;
  pattern.step = slotsOf->second;
  pattern.inserts = std::move(inserts);
  // An operand reading the same members of the stack the chain started
  // from, none of them written before the run: the update is in place.
  SmallVector<int64_t> written;
  Value root = chainRoot(init, rolled, written);
  for (auto [j, operand] : llvm::enumerate(run.operands)) {
    bool sameMembers = operand.kind == OperandPattern::Member &&
                       operand.value == root &&
                       operand.start == pattern.start &&
                       operand.step == pattern.step;
    bool unwritten = llvm::none_of(written, [&](int64_t slot) {
      return llvm::is_contained(slots, slot);
    });
    bool free = llvm::none_of(run.results, [&](const ResultPattern &other) {
      return other.readFrom == j;
    });
    if (sameMembers && unwritten && free) {
      pattern.readFrom = j;
      break;
    }
  }
  return true;
}

/// The operand the first call passes where the next reads result r.
Value carriedInit(const Run &run, unsigned r) {
  for (auto [j, operand] : llvm::enumerate(run.operands))
    if (operand.kind == OperandPattern::Carried && operand.result == r)
      return func::CallOp(run.calls[0]).getOperand(j);
  return Value();
}

void classifyResults(Run &run, const WrittenStacks &rolled) {
  unsigned n = run.calls.size();
  run.results.assign(run.calls[0].getNumResults(), ResultPattern());
  for (unsigned r = 0; r < run.results.size(); ++r) {
    ResultPattern &pattern = run.results[r];
    pattern.carried = llvm::any_of(run.operands, [&](const OperandPattern &p) {
      return p.kind == OperandPattern::Carried && p.result == r;
    });
    bool readBeforeLast = false;
    for (unsigned i = 0; i + 1 < n; ++i)
      readBeforeLast |= !usesAfter(run, i, r).empty();
    bool readLast = !usesAfter(run, n - 1, r).empty();
    if (!readBeforeLast && !readLast)
      continue;
    if (!pattern.carried && matchChain(run, r, rolled, pattern))
      continue;
    pattern.use = readBeforeLast ? ResultPattern::Every : ResultPattern::Last;
  }
}

/// Whether `callee` is a layer body the run may call a variant of.
bool isLayerBody(func::FuncOp callee) {
  return callee && !callee.isExternal() && callee.isPrivate();
}

/// The op after `call`, past the member writes of its results (an update
/// written back into its stack).
Operation *nextAfter(func::CallOp call) {
  Operation *next = call->getNextNode();
  while (auto insert = dyn_cast_or_null<tensor::InsertSliceOp>(next)) {
    auto source = dyn_cast<OpResult>(insert.getSource());
    if (!source || source.getOwner() != call)
      break;
    next = next->getNextNode();
  }
  return next;
}

/// The longest run of calls of `first`'s callee from `first` on.
/// Whether `next` passes its operands as `patterns` say call `i` of the
/// run does (the patterns of two calls or more).
bool follows(ArrayRef<OperandPattern> patterns, func::CallOp previous,
             func::CallOp next, int64_t i) {
  return llvm::all_of(llvm::enumerate(patterns), [&](auto indexed) {
    auto [j, pattern] = indexed;
    Value operand = next.getOperand(j);
    switch (pattern.kind) {
    case OperandPattern::Same:
      return operand == pattern.value;
    case OperandPattern::Carried:
      return operand == previous.getResult(pattern.result);
    case OperandPattern::Member: {
      std::optional<MemberRead> read = matchMemberRead(operand);
      return read && read->stack == pattern.value &&
             read->slot == pattern.start + i * pattern.step;
    }
    case OperandPattern::Progression: {
      APInt value;
      return matchPattern(operand, m_ConstantInt(&value)) &&
             value.getSExtValue() == pattern.start + i * pattern.step;
    }
    }
    llvm_unreachable("unknown operand pattern");
  });
}

/// The longest run of calls of `first`'s callee from `first` on: two calls
/// fix the patterns, each further call must follow them.
Run collectRun(func::CallOp first, const WrittenStacks &rolled) {
  Run run{{first}, *classifyOperands(first), {}, {}};
  while (auto next = dyn_cast_or_null<func::CallOp>(nextAfter(run.calls.back()))) {
    if (next.getCallee() != first.getCallee())
      break;
    if (run.calls.size() == 1) {
      std::optional<SmallVector<OperandPattern>> patterns =
          classifyOperands({first, next});
      if (!patterns)
        break;
      run.operands = std::move(*patterns);
    } else if (!follows(run.operands, run.calls.back(), next,
                        run.calls.size())) {
      break;
    }
    run.calls.push_back(next);
  }
  for (func::CallOp call : run.calls)
    run.members.insert(call);
  classifyResults(run, rolled);
  return run;
}

/// A member write into `stack` writes one whole member: moved up to right
/// after what it writes is computed, so that a run's calls and their
/// writes are adjacent. Positions are kept by hand: the block's own order
/// would be recomputed after every move.
void hoistMemberWrites(Block &block) {
  DenseMap<Operation *, double> position;
  for (auto [index, op] : llvm::enumerate(block))
    position[&op] = index;
  for (auto insert :
       llvm::make_early_inc_range(block.getOps<tensor::InsertSliceOp>())) {
    if (!matchMemberWrite(insert))
      continue;
    Operation *after = nullptr;
    bool inBlock = true;
    for (Value value : {insert.getSource(), insert.getDest()}) {
      Operation *def = value.getDefiningOp();
      inBlock &= !def || def->getBlock() == &block;
      if (def && inBlock && (!after || position[after] < position[def]))
        after = def;
    }
    if (!inBlock)
      continue;
    // Between `after` and the op that followed it.
    Operation *before = after ? after->getNextNode() : &block.front();
    if (before == insert)
      continue;
    double low = after ? position[after] : -1.0;
    position[insert] = (low + position[before]) / 2;
    insert->moveBefore(before);
  }
}

/// Call i's slot in a stack: (start + i * step) mod modulo (no modulo: 0).
struct Slots {
  int64_t start = 0, step = 0, modulo = 0;
};

Value slotAt(OpBuilder &b, Location loc, Value i, Slots slots) {
  auto constant = [&](int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  };
  // One call's slot, or a slot every call shares.
  if (slots.step == 0)
    return constant(slots.modulo ? slots.start % slots.modulo : slots.start);
  Value slot = i;
  if (slots.step != 1)
    slot = arith::MulIOp::create(b, loc, slot, constant(slots.step));
  if (slots.start != 0)
    slot = arith::AddIOp::create(b, loc, slot, constant(slots.start));
  if (slots.modulo != 0)
    slot = arith::RemUIOp::create(b, loc, slot, constant(slots.modulo));
  return slot;
}

/// Where a loop keeps result r: a stack it carries, which each call
/// writes its result into. A loop carries nothing but such stacks, each
/// updated in place: a value a call returns anew would be a new buffer
/// every iteration, which deallocation could only free with run-time
/// ownership checks.
struct Kept {
  /// The stack before the run.
  Value init;
  Slots write;
  /// Where the operand carrying this result reads it (a carried result).
  Slots read;
};

/// The stacks the run keeps its results in, per result (no init: none).
/// A single call keeps only its in-place updates in stacks.
/// Whether every result the loop keeps across its iterations (carried, or
/// read after it) is a tensor, which a stack can hold. A scalar one (the
/// index where a layer's dropout sits in the global batch) is not: such
/// calls stay as they are.
bool keepsOnlyTensors(const Run &run) {
  if (run.calls.size() == 1)
    return true;
  return llvm::all_of(llvm::enumerate(run.results), [&](auto indexed) {
    auto [r, pattern] = indexed;
    bool kept = pattern.use == ResultPattern::Chain || pattern.carried ||
                pattern.use != ResultPattern::None;
    return !kept || isa<RankedTensorType>(run.calls.front()->getResult(r).getType());
  });
}

SmallVector<Kept> planKept(OpBuilder &b, Location loc, const Run &run) {
  func::CallOp first = run.calls[0];
  int64_t n = run.calls.size();
  SmallVector<Kept> kept(run.results.size());
  for (auto [r, pattern] : llvm::enumerate(run.results)) {
    Slots chain{pattern.start, pattern.step};
    if (pattern.use == ResultPattern::Chain) {
      kept[r] = {pattern.init, chain, chain};
      continue;
    }
    if (n == 1 || (!pattern.carried && pattern.use == ResultPattern::None))
      continue;
    auto member = cast<RankedTensorType>(first.getResult(r).getType());
    bool every = pattern.use == ResultPattern::Every;
    // The layers' outputs after their input; a carried value read only
    // at the end alternates between two slots; any other one slot.
    int64_t size = pattern.carried ? (every ? n + 1 : 2) : (every ? n : 1);
    auto type = getStackType(member, size);
    Value stack = tensor::EmptyOp::create(b, loc, type.getShape(),
                                          type.getElementType());
    if (pattern.carried) {
      stack = insertMember(b, loc, carriedInit(run, r), stack,
                           b.getIndexAttr(0));
      int64_t modulo = every ? 0 : 2;
      kept[r] = {stack, {1, 1, modulo}, {0, 1, modulo}};
      continue;
    }
    kept[r] = {stack, {0, every ? 1 : 0}, {}};
  }
  return kept;
}

/// For each operand, the result whose stack it reads (a carried value, or
/// the members an update in place writes back).
SmallVector<std::optional<unsigned>> readsKept(const Run &run) {
  SmallVector<std::optional<unsigned>> reads(run.operands.size());
  for (auto [j, operand] : llvm::enumerate(run.operands))
    if (operand.kind == OperandPattern::Carried && run.calls.size() > 1)
      reads[j] = operand.result;
  for (auto [r, pattern] : llvm::enumerate(run.results))
    if (pattern.readFrom)
      reads[*pattern.readFrom] = r;
  return reads;
}

/// Whether result r updates in place the members an operand read.
bool writesWhereItReads(const Run &run, unsigned r) {
  return run.results[r].use == ResultPattern::Chain &&
         run.results[r].readFrom.has_value();
}

/// The function a rolled run calls: `callee` taking whole stacks and slots,
/// and writing the results the program keeps into their stacks.
func::FuncOp buildVariant(const Run &run, func::FuncOp callee,
                          ArrayRef<Kept> kept, SymbolTable &symbols) {
  OpBuilder b(callee);
  Location loc = callee.getLoc();
  // @..._loop for a loop's, @..._stacked for one call's.
  auto function = func::FuncOp::create(
      b, loc,
      (callee.getName() + (run.calls.size() > 1 ? "_loop" : "_stacked")).str(),
      FunctionType::get(callee.getContext(), {}, {}));
  function.setPrivate();
  Block *entry = function.addEntryBlock();
  OpBuilder body = OpBuilder::atBlockEnd(entry);
  auto addArg = [&](Type type) { return entry->addArgument(type, loc); };
  SmallVector<std::optional<unsigned>> reads = readsKept(run);
  SmallVector<Value> keptArgs(run.results.size());
  SmallVector<Value> writeSlots(run.results.size());
  IRMapping mapping;
  for (auto [j, pattern] : llvm::enumerate(run.operands)) {
    Value calleeArg = callee.getArgument(j);
    if (reads[j]) {
      unsigned r = *reads[j];
      Value stack = addArg(kept[r].init.getType());
      Value slot = addArg(body.getIndexType());
      keptArgs[r] = stack;
      // An update in place writes the member it read: one slot value, so
      // that bufferization sees the same slice read and written.
      if (writesWhereItReads(run, r))
        writeSlots[r] = slot;
      mapping.map(calleeArg, extractMember(body, loc, stack, slot));
      continue;
    }
    if (pattern.kind != OperandPattern::Member) {
      mapping.map(calleeArg, addArg(calleeArg.getType()));
      continue;
    }
    Value stack = addArg(pattern.value.getType());
    mapping.map(calleeArg, extractMember(body, loc, stack,
                                         addArg(body.getIndexType())));
  }
  for (auto [r, k] : llvm::enumerate(kept))
    if (k.init && !keptArgs[r])
      keptArgs[r] = addArg(k.init.getType());
  for (auto [r, k] : llvm::enumerate(kept))
    if (k.init && !writeSlots[r])
      writeSlots[r] = addArg(body.getIndexType());
  for (Operation &op : callee.front().without_terminator())
    body.clone(op, mapping);
  auto ret = cast<func::ReturnOp>(callee.front().getTerminator());
  SmallVector<Value> results;
  // A single call returns what is read after it as it is.
  if (run.calls.size() == 1)
    for (auto [r, pattern] : llvm::enumerate(run.results))
      if (pattern.use == ResultPattern::Last)
        results.push_back(mapping.lookup(ret.getOperand(r)));
  for (auto [r, k] : llvm::enumerate(kept))
    if (k.init)
      results.push_back(insertMember(body, loc,
                                     mapping.lookup(ret.getOperand(r)),
                                     keptArgs[r], writeSlots[r]));
  func::ReturnOp::create(body, loc, results);
  function.setType(FunctionType::get(callee.getContext(),
                                     entry->getArgumentTypes(),
                                     ValueRange(results).getTypes()));
  symbols.insert(function, Block::iterator(callee));
  return function;
}

/// The variant's operands for call i (`i` an index value), the kept stacks
/// as they are before it.
SmallVector<Value> variantOperands(OpBuilder &b, Location loc, const Run &run,
                                   ArrayRef<Kept> kept, Value i,
                                   ArrayRef<Value> stacks) {
  SmallVector<std::optional<unsigned>> reads = readsKept(run);
  SmallVector<Value> operands;
  for (auto [j, pattern] : llvm::enumerate(run.operands)) {
    if (reads[j]) {
      operands.push_back(stacks[*reads[j]]);
      operands.push_back(slotAt(b, loc, i, kept[*reads[j]].read));
      continue;
    }
    if (pattern.kind == OperandPattern::Member) {
      operands.push_back(pattern.value);
      operands.push_back(
          slotAt(b, loc, i, Slots{pattern.start, pattern.step, 0}));
      continue;
    }
    if (pattern.kind == OperandPattern::Progression) {
      operands.push_back(
          slotAt(b, loc, i, Slots{pattern.start, pattern.step, 0}));
      continue;
    }
    operands.push_back(pattern.kind == OperandPattern::Same
                           ? pattern.value
                           : func::CallOp(run.calls[0]).getOperand(j));
  }
  for (auto [r, k] : llvm::enumerate(kept))
    if (k.init && !llvm::is_contained(reads, std::optional<unsigned>(r)))
      operands.push_back(stacks[r]);
  for (auto [r, k] : llvm::enumerate(kept))
    if (k.init && !writesWhereItReads(run, r))
      operands.push_back(slotAt(b, loc, i, k.write));
  return operands;
}

/// The member of `stack` at `slot`, for each use.
void readAfter(OpBuilder &b, Location loc, ArrayRef<OpOperand *> uses,
               Value stack, int64_t slot) {
  if (uses.empty())
    return;
  Value member = extractMember(b, loc, stack, b.getIndexAttr(slot));
  for (OpOperand *use : uses)
    use->set(member);
}

/// Replaces the run by a loop over its calls (one call of the variant when
/// the run is one call), and its results' reads after it.
void roll(Run &run, func::FuncOp callee, SymbolTable &symbols,
          WrittenStacks &rolled) {
  func::CallOp first = run.calls[0];
  Location loc = first.getLoc();
  int64_t n = run.calls.size();
  OpBuilder b(first);
  SmallVector<Kept> kept = planKept(b, loc, run);
  func::FuncOp variant = buildVariant(run, callee, kept, symbols);
  SmallVector<Value> inits;
  SmallVector<int> stackIndex(run.results.size(), -1);
  for (auto [r, k] : llvm::enumerate(kept))
    if (k.init) {
      stackIndex[r] = inits.size();
      inits.push_back(k.init);
    }
  auto stacksOf = [&](ValueRange values) {
    return llvm::map_to_vector(stackIndex, [&](int index) {
      return index < 0 ? Value() : values[index];
    });
  };
  SmallVector<Value> finals, values;
  if (n == 1) {
    // One call's slots are constants: no induction variable.
    auto call = func::CallOp::create(
        b, loc, variant,
        variantOperands(b, loc, run, kept, Value(), stacksOf(inits)));
    unsigned lastValues = call.getNumResults() - inits.size();
    values = call.getResults().take_front(lastValues);
    finals = call.getResults().drop_front(lastValues);
  } else {
    auto loop = scf::ForOp::create(
        b, loc, arith::ConstantIndexOp::create(b, loc, 0),
        arith::ConstantIndexOp::create(b, loc, n),
        arith::ConstantIndexOp::create(b, loc, 1), inits,
        [&](OpBuilder &body, Location at, Value i, ValueRange iterArgs) {
          auto call = func::CallOp::create(
              body, at, variant,
              variantOperands(body, at, run, kept, i, stacksOf(iterArgs)));
          scf::YieldOp::create(body, at, call.getResults());
        });
    finals = loop.getResults();
  }
  Operation *end = finals.empty() ? values.back().getDefiningOp()
                                  : finals.back().getDefiningOp();
  b.setInsertionPointAfter(end);
  SmallVector<Value> stacks = stacksOf(finals);
  unsigned nextValue = 0;
  for (auto [r, pattern] : llvm::enumerate(run.results)) {
    if (pattern.use == ResultPattern::Chain) {
      pattern.inserts.back().getResult().replaceAllUsesWith(stacks[r]);
      Written &written = rolled[stacks[r]];
      written.from = pattern.init;
      for (int64_t i = 0; i < n; ++i)
        written.slots.push_back(pattern.start + i * pattern.step);
      continue;
    }
    if (pattern.use == ResultPattern::None)
      continue;
    if (n == 1) {
      for (OpOperand *use : usesAfter(run, 0, r))
        use->set(values[nextValue]);
      ++nextValue;
      continue;
    }
    const Kept &k = kept[r];
    if (pattern.use == ResultPattern::Last) {
      int64_t slot = k.write.modulo ? n % k.write.modulo : k.write.start;
      readAfter(b, loc, usesAfter(run, n - 1, r), stacks[r], slot);
      continue;
    }
    for (int64_t i = 0; i < n; ++i)
      readAfter(b, loc, usesAfter(run, i, r), stacks[r], i + k.write.start);
    // The run's input, where read after the run, from the stack too: the
    // first layer's backward pass then reads like the others.
    if (pattern.carried) {
      SmallVector<OpOperand *> later;
      for (OpOperand &use : carriedInit(run, r).getUses())
        if (use.getOwner()->getBlock() == end->getBlock() &&
            end->isBeforeInBlock(use.getOwner()))
          later.push_back(&use);
      readAfter(b, loc, later, stacks[r], 0);
    }
  }
  for (ResultPattern &pattern : llvm::reverse(run.results))
    for (tensor::InsertSliceOp insert : llvm::reverse(pattern.inserts))
      insert->erase();
  for (func::CallOp call : llvm::reverse(run.calls))
    call->erase();
}

/// Every member of one stack, summed alone, is the stack summed.
void sumWholeStacks(func::FuncOp function) {
  function.walk([](tp::SumSquaresOp sum) {
    SmallVector<std::optional<MemberRead>> reads =
        llvm::map_to_vector(sum.getInputs(), matchMemberRead);
    DenseMap<Value, llvm::SmallDenseSet<int64_t>> slots;
    DenseMap<Value, int64_t> readsOf;
    for (const std::optional<MemberRead> &read : reads)
      if (read) {
        slots[read->stack].insert(read->slot);
        ++readsOf[read->stack];
      }
    // Each slot once, and all of them.
    auto whole = [&](Value stack) {
      int64_t count = cast<RankedTensorType>(stack.getType()).getDimSize(0);
      return static_cast<int64_t>(slots[stack].size()) == count &&
             readsOf[stack] == count;
    };
    SmallVector<Value> inputs;
    llvm::DenseSet<Value> added;
    for (auto [input, read] : llvm::zip(sum.getInputs(), reads)) {
      if (!read || !whole(read->stack))
        inputs.push_back(input);
      else if (added.insert(read->stack).second)
        inputs.push_back(read->stack);
    }
    sum.getInputsMutable().assign(inputs);
  });
}

void eraseDeadMemberReads(func::FuncOp function) {
  SmallVector<Operation *> reads;
  function.walk([&](tensor::ExtractSliceOp slice) { reads.push_back(slice); });
  for (Operation *read : llvm::reverse(reads))
    if (read->use_empty())
      read->erase();
}

void rollLayers(func::FuncOp function, SymbolTable &symbols) {
  Block &block = function.front();
  hoistMemberWrites(block);
  SmallVector<func::CallOp> calls(block.getOps<func::CallOp>());
  llvm::DenseSet<Operation *> done;
  WrittenStacks rolled;
  for (func::CallOp call : calls) {
    if (done.contains(call))
      continue;
    auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
    if (!isLayerBody(callee))
      continue;
    Run run = collectRun(call, rolled);
    for (func::CallOp member : run.calls)
      done.insert(member);
    bool readsMembers = llvm::any_of(run.operands, [](const OperandPattern &p) {
      return p.kind == OperandPattern::Member;
    });
    // One call of whole buffers is fine as it is.
    if (run.calls.size() == 1 && !readsMembers)
      continue;
    if (!keepsOnlyTensors(run))
      continue;
    roll(run, callee, symbols, rolled);
  }
  sumWholeStacks(function);
  eraseDeadMemberReads(function);
}

struct RollLayersPass : public megatron::impl::RollLayersBase<RollLayersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> callers;
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal() && !function.isPrivate())
        callers.push_back(function);
    for (func::FuncOp function : callers)
      rollLayers(function, symbols);
    // Bodies every call of which now calls a variant.
    for (auto function :
         llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (function.isPrivate() && !function.isExternal() &&
          SymbolTable::symbolKnownUseEmpty(function, module))
        function.erase();
  }
};

} // namespace
