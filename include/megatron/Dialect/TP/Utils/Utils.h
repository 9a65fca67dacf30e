//===- Utils.h - what the passes ask of a tp program ------------*- C++ -*-===//
//
// Questions about a whole program rather than one op: which dialects it is
// written in, whether it is already per-rank, which of its functions are
// entries and which arguments parameters, the training phase an op runs in,
// and small builders the passes share. Nothing here is part of the
// dialect's IR; the passes, the lowering and the reports use it.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_DIALECT_TP_UTILS_UTILS_H
#define MEGATRON_DIALECT_TP_UTILS_UTILS_H

#include "megatron/Dialect/TP/IR/TP.h"

namespace mlir::tp {

/// The bytes a ranked tensor of `type` holds (its elements, each rounded up
/// to whole bytes).
int64_t getNumBytes(Type type);

/// A constant float tensor of `type` holding zeros: a gradient nothing
/// reaches, an accumulator before its first term.
Value buildZeros(OpBuilder &b, Location loc, Type type);

/// A parameter of `function`: a float tensor argument whose role is
/// "param" (stated, or by default).
bool isParameter(FunctionOpInterface function, unsigned index);

/// A function kept as the forward entry of a training step's library
/// (tp.entry = "forward"): the passes that build the training step leave it.
bool isForwardEntry(FunctionOpInterface function);
/// Whether `function` is generation's prefill or decode entry.
bool isGenerationEntry(FunctionOpInterface function);

/// The dialects a pass takes: the tp dialect (the planner's input), linalg
/// too (what is partitioned from its shardings), or scf as well (a per-rank
/// program, whose micro-batches may run as a loop).
enum class ProgramDialects { TP, TPAndLinalg, PerRank };

/// Whether tp-partition made `function` per-rank: its tp.partitioned marker,
/// or (a per-rank program written before the marker, or with the marker
/// dropped) an argument with a tp.global_shape.
bool isPartitioned(FunctionOpInterface function);

/// Fails, with an error at each function tp-partition already made per-rank
/// and at the first op of each kind from outside the `accepted` dialects,
/// unless `module` is a global program: the passes that plan and partition
/// (`pass` names the one asking) take the global program, their output fed
/// back is recognised rather than misread, and a program in another dialect
/// is refused rather than passed through replicated.
LogicalResult verifyGlobalProgram(ModuleOp module, StringRef pass,
                                  ProgramDialects accepted = ProgramDialects::TP);

/// Fails, with an error at the first op of each kind from outside the
/// `accepted` dialects: the passes that build, report on or lower a per-rank
/// program refuse one in another dialect (their own lowered output fed
/// back) rather than pass it through unchanged or report nothing.
LogicalResult
verifyProgramDialects(ModuleOp module, StringRef pass,
                      ProgramDialects accepted = ProgramDialects::PerRank);

/// Whether `value` is available before `op` in `op`'s block: an argument
/// of that block, or the result of an op before it there. A fusion at `op`
/// may then read it.
bool isDefinedBefore(Value value, Operation *op);

/// The training-step phase `op` belongs to: "forward", "recompute" (a
/// layer's forward run again before its backward, tp-recompute-layers),
/// "backward" or "optimizer" (tp.phase).
StringRef getPhase(Operation *op);
/// Whether `op` is a copy tp-recompute-layers made of a forward op: work the
/// step runs again, not the model's.
bool isRecomputed(Operation *op);
/// Marks the ops from `first` up to (not including) `end` with `phase`.
void markPhase(Operation *first, Operation *end, StringRef phase);
} // namespace mlir::tp

#endif // MEGATRON_DIALECT_TP_UTILS_UTILS_H
