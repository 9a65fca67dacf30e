//===- Utils.cpp - what the passes ask of a tp program --------------------===//
#include "megatron/Dialect/TP/Utils/Utils.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::tp;

bool tp::isParameter(FunctionOpInterface function, unsigned index) {
  return isa<FloatType>(
             getElementTypeOrSelf(function.getArgumentTypes()[index])) &&
         getArgumentKind(function, index).role == ArgumentRole::Parameter;
}

bool tp::isForwardEntry(FunctionOpInterface function) {
  auto entry = function->getAttrOfType<StringAttr>(TPDialect::kEntryAttrName);
  return entry && entry.getValue() == MGT_ENTRY_KIND_FORWARD;
}

bool tp::isGenerationEntry(FunctionOpInterface function) {
  auto entry = function->getAttrOfType<StringAttr>(TPDialect::kEntryAttrName);
  return entry && (entry.getValue() == MGT_ENTRY_KIND_PREFILL ||
                   entry.getValue() == MGT_ENTRY_KIND_DECODE);
}

/// The dialects a global tp program is written in: what gpt2-mlir and the
/// model families emit, what the planner has rules for, and bufferization,
/// whose materialize_in_destination tp-export-logits writes outputs with.
/// Programs partitioned from their own shardings may also be linalg, what
/// frameworks lower to.
/// A per-rank program may also hold the scf.for of its micro-batches.
static bool isProgramDialect(StringRef dialect, ProgramDialects accepted) {
  if (accepted != ProgramDialects::TP && dialect == "linalg")
    return true;
  if (accepted == ProgramDialects::PerRank && dialect == "scf")
    return true;
  return llvm::is_contained({StringRef(TPDialect::getDialectNamespace()),
                             StringRef("builtin"), StringRef("func"),
                             StringRef("arith"), StringRef("tensor"),
                             StringRef("math"), StringRef("bufferization")},
                            dialect);
}

/// Where a program in `dialect` is taken, when a pass accepting only
/// `accepted` refuses it.
static StringRef suggestPipeline(StringRef dialect, ProgramDialects accepted) {
  if (accepted == ProgramDialects::TP && dialect == "linalg")
    return "; a linalg program is partitioned from the tp.sharding of its "
           "arguments (megatron-partition-pipeline)";
  return "";
}

static StringRef acceptedDialectNames(ProgramDialects accepted) {
  switch (accepted) {
  case ProgramDialects::TP:
    return "tp";
  case ProgramDialects::TPAndLinalg:
    return "tp and linalg";
  case ProgramDialects::PerRank:
    return "tp, linalg and scf";
  }
  llvm_unreachable("unknown program dialects");
}

/// Fails at the first op of each kind from another dialect: a framework's
/// leftovers (IREE's util) or upstream shard annotations would otherwise
/// pass through replicated and unchanged.
LogicalResult tp::verifyProgramDialects(ModuleOp module, StringRef pass,
                                        ProgramDialects accepted) {
  LogicalResult result = success();
  llvm::StringSet<> reported;
  // Pre-order, so that a foreign op's own body (linalg.yield) goes unsaid.
  module.walk<WalkOrder::PreOrder>([&](Operation *op) {
    StringRef dialect = op->getName().getDialectNamespace();
    if (isProgramDialect(dialect, accepted))
      return WalkResult::advance();
    if (!reported.insert(op->getName().getStringRef()).second)
      return WalkResult::skip();
    mlir::emitError(op->getLoc())
        << "'" << op->getName() << "' is not part of a program " << pass
        << " takes: it takes the "
        << acceptedDialectNames(accepted)
        << " dialects (with func, arith, tensor, math and bufferization), not "
           "the "
        << dialect << " dialect" << suggestPipeline(dialect, accepted);
    result = failure();
    return WalkResult::skip();
  });
  return result;
}

bool tp::isPartitioned(FunctionOpInterface function) {
  return function->hasAttr(TPDialect::kPartitionedAttrName) ||
         llvm::any_of(llvm::seq(function.getNumArguments()), [&](unsigned i) {
           return function.getArgAttr(i, TPDialect::kGlobalShapeAttrName);
         });
}

LogicalResult tp::verifyGlobalProgram(ModuleOp module, StringRef pass,
                                      ProgramDialects accepted) {
  if (failed(verifyProgramDialects(module, pass, accepted)))
    return failure();
  LogicalResult result = success();
  module.walk([&](FunctionOpInterface function) {
    if (!isPartitioned(function))
      return;
    // At the function's location, without printing the whole function.
    mlir::emitError(function.getLoc()) << "'@" << function.getName()
                         << "' is already partitioned (a per-rank program); "
                         << pass << " takes the program at global shapes";
    result = failure();
  });
  return result;
}

StringRef tp::getPhase(Operation *op) {
  if (auto phase = op->getAttrOfType<StringAttr>(TPDialect::kPhaseAttrName))
    return phase.getValue();
  return "forward";
}

bool tp::isRecomputed(Operation *op) { return getPhase(op) == "recompute"; }

int64_t tp::getNumBytes(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor.getNumElements() * ((tensor.getElementTypeBitWidth() + 7) / 8);
}

Value tp::buildZeros(OpBuilder &b, Location loc, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(
                  tensor, b.getFloatAttr(tensor.getElementType(), 0.0)));
}

bool tp::isDefinedBefore(Value value, Operation *op) {
  if (auto arg = dyn_cast<BlockArgument>(value))
    return arg.getOwner() == op->getBlock();
  Operation *def = value.getDefiningOp();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

void tp::markPhase(Operation *first, Operation *end, StringRef phase) {
  auto attr = StringAttr::get(first->getContext(), phase);
  for (Operation *op = first; op && op != end; op = op->getNextNode())
    op->walk([&](Operation *nested) {
      nested->setAttr(TPDialect::kPhaseAttrName, attr);
    });
}
