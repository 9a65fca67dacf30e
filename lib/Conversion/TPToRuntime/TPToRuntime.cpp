//===- TPToRuntime.cpp - the convert-tp-to-runtime pass -------------------===//
//
// The per-rank program after tp-partition is lowered op by op, in program
// order, by the pattern families of lib/Conversion/TPToRuntime (one file
// each, gathered by populateTPToRuntimePatterns). Ops with a hand-written
// kernel become calls into the runtime on flat buffers, which the
// bare-pointer calling convention later turns into the plain C pointers of
// the runtime's ABI; elementwise ops become linalg.generic on tensors so
// that elementwise fusion can merge bias, GELU and residual chains before
// bufferization. Fusions that replace a chain of ops with one call sweep
// first (the GEMM epilogues, a tied table's two gradients); the residual add and its layer norm arrive
// fused already (tp-fuse-residual-norm), their branch bias taken before
// the epilogues look for theirs.
//
//===----------------------------------------------------------------------===//
#include "megatron/Conversion/Passes.h"
#include "megatron/Conversion/TPToRuntime/TPToRuntime.h"
#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Rewrite/PatternApplicator.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "convert-tp-to-runtime"

namespace mlir::megatron {
#define GEN_PASS_DEF_CONVERTTPTORUNTIME
#include "megatron/Conversion/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

void megatron::populateTPToRuntimePatterns(RewritePatternSet &patterns,
                                           const RuntimeTargetInfo &target) {
  populateGemmToRuntimePatterns(patterns, target);
  populateAttentionToRuntimePatterns(patterns, target);
  populateGenerationToRuntimePatterns(patterns, target);
  populateNormalizationToRuntimePatterns(patterns, target);
  populateEmbeddingToRuntimePatterns(patterns, target);
  populateElementwiseToRuntimePatterns(patterns, target);
  populateDropoutToRuntimePatterns(patterns, target);
  populateLossToRuntimePatterns(patterns, target);
  populateCollectiveToRuntimePatterns(patterns, target);
  populateOptimizerToRuntimePatterns(patterns, target);
}

namespace {

/// The element types the target's kernels store, checked before any
/// lowering, the fused ones included: the patterns pick _f32 for anything
/// that is not bf16.
LogicalResult checkElementTypes(func::FuncOp function,
                                const RuntimeTargetInfo &target) {
  WalkResult result = function.walk([&](Operation *op) {
    if (!isa<TPDialect>(op->getDialect()))
      return WalkResult::advance();
    for (Type type : llvm::concat<Type>(op->getOperandTypes(),
                                        op->getResultTypes())) {
      Type element = getElementTypeOrSelf(type);
      if (isa<FloatType>(element) && !target.storesElementType(element)) {
        op->emitOpError("has no runtime lowering for element type ")
            << element << "; the runtime stores f32 and bf16";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

/// Records the ops a sweep erased, so that it does not visit them.
struct ErasedOps : public RewriterBase::Listener {
  void notifyOperationErased(Operation *op) override { erased.insert(op); }
  DenseSet<Operation *> erased;
};

/// Applies `patterns` once to each tp op of `function`, in program order.
/// A pattern that cannot lower its op says why at the op; the sweep then
/// fails, and nothing reports the same op twice.
LogicalResult sweep(func::FuncOp function,
                    const FrozenRewritePatternSet &patterns) {
  SmallVector<Operation *> ops;
  function.walk([&](Operation *op) {
    if (isa<TPDialect>(op->getDialect()))
      ops.push_back(op);
  });
  bool reported = false;
  ScopedDiagnosticHandler errors(function.getContext(), [&](Diagnostic &diag) {
    reported |= diag.getSeverity() == DiagnosticSeverity::Error;
    return failure(); // and on to the tool's handler
  });
  PatternApplicator applicator(patterns);
  applicator.applyDefaultCostModel();
  ErasedOps listener;
  PatternRewriter rewriter(function.getContext());
  rewriter.setListener(&listener);
  for (Operation *op : ops) {
    if (listener.erased.contains(op))
      continue;
    rewriter.setInsertionPoint(op);
    LLVM_DEBUG(llvm::dbgs() << "lowering " << op->getName() << " at "
                            << op->getLoc() << "\n");
    (void)applicator.matchAndRewrite(op, rewriter);
  }
  return failure(reported);
}

/// The rank's runtime context becomes the first argument; 0-d tensor
/// results (the loss) are returned as scalars, unless they update an
/// argument (a function's 0-d output).
void addContextAndScalarResults(func::FuncOp function) {
  MLIRContext *context = function.getContext();
  // A result that updates an argument is written into that argument's
  // buffer: one-shot bufferization may then do so in place, and
  // drop-equivalent-buffer-results removes the result. All are set at
  // once: one argument at a time would copy every argument's attributes.
  SmallVector<DictionaryAttr> argAttrs;
  function.getAllArgAttrs(argAttrs);
  for (unsigned i = 0; i < function.getNumResults(); ++i)
    if (auto index = function.getResultAttrOfType<IntegerAttr>(
            i, TPDialect::kUpdatesAttrName)) {
      NamedAttrList attrs(argAttrs[index.getInt()]);
      attrs.set(bufferization::BufferizationDialect::kWritableAttrName,
                BoolAttr::get(context, true));
      argAttrs[index.getInt()] = attrs.getDictionary(context);
    }
  function.setAllArgAttrs(argAttrs);
  auto ptr = LLVM::LLVMPointerType::get(context);
  (void)function.insertArgument(0, ptr, {}, function.getLoc());
  auto ret = cast<func::ReturnOp>(function.front().getTerminator());
  OpBuilder b(ret);
  SmallVector<Type> results;
  for (OpOperand &operand : ret->getOpOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.get().getType());
    bool updatesArgument = function.getResultAttr(
        operand.getOperandNumber(), TPDialect::kUpdatesAttrName) != nullptr;
    if (type && type.getRank() == 0 && !updatesArgument)
      operand.set(tensor::ExtractOp::create(b, ret.getLoc(), operand.get(),
                                            ValueRange()));
    results.push_back(operand.get().getType());
  }
  function.setType(
      FunctionType::get(context, function.getArgumentTypes(), results));
}

/// The calls of `functions` (outlined layers) and their callees.
SmallVector<std::pair<func::CallOp, func::FuncOp>>
callsBetween(ModuleOp module, ArrayRef<func::FuncOp> functions) {
  SymbolTable symbols(module);
  SmallVector<std::pair<func::CallOp, func::FuncOp>> calls;
  module.walk([&](func::CallOp call) {
    auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
    if (llvm::is_contained(functions, callee))
      calls.push_back({call, callee});
  });
  return calls;
}

/// A call of a function of the program (an outlined layer) passes the
/// caller's runtime context, and a 0-d result the callee now returns as a
/// scalar becomes a tensor again for the caller's uses.
void passContextToCall(func::CallOp call, func::FuncOp callee) {
  auto caller = call->getParentOfType<func::FuncOp>();
  OpBuilder b(call);
  SmallVector<Value> operands = {caller.getArgument(0)};
  llvm::append_range(operands, call.getOperands());
  auto lowered = func::CallOp::create(b, call.getLoc(), callee, operands);
  b.setInsertionPointAfter(lowered);
  for (auto [old, result] : llvm::zip(call.getResults(), lowered.getResults())) {
    Value replacement = result;
    if (old.getType() != result.getType())
      replacement = tensor::FromElementsOp::create(b, call.getLoc(),
                                                   old.getType(), result);
    old.replaceAllUsesWith(replacement);
  }
  call.erase();
}

struct ConvertTPToRuntimePass
    : public megatron::impl::ConvertTPToRuntimeBase<ConvertTPToRuntimePass> {
  using ConvertTPToRuntimeBase::ConvertTPToRuntimeBase;

  LogicalResult initialize(MLIRContext *context) override {
    if (geluEpilogueRowMultiple < 1)
      return emitError(UnknownLoc::get(context),
                       "gelu-epilogue-row-multiple must be positive, got ")
             << geluEpilogueRowMultiple.getValue();
    target.geluEpilogueRowMultiple = geluEpilogueRowMultiple;
    RewritePatternSet epilogues(context), ops(context);
    populateGemmEpilogueFusionPatterns(epilogues, target);
    populateEmbeddingGradAccumulationPatterns(epilogues, target);
    populateTPToRuntimePatterns(ops, target);
    sweeps = {FrozenRewritePatternSet(std::move(epilogues)),
              FrozenRewritePatternSet(std::move(ops))};
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(tp::verifyProgramDialects(getOperation(), getArgument())))
      return signalPassFailure();
    SmallVector<func::FuncOp> functions = megatron::definedFunctions(module);
    // Before the lowering adds the runtime's own calls.
    SmallVector<std::pair<func::CallOp, func::FuncOp>> calls =
        callsBetween(module, functions);
    for (func::FuncOp function : functions)
      if (failed(lower(function)))
        return signalPassFailure();
    for (auto [call, callee] : calls)
      passContextToCall(call, callee);
    // Shardings and the mesh only described the partition; the runtime's
    // manifest is made before this lowering.
    for (func::FuncOp function : functions)
      removeTPAttributes(function);
    for (auto mesh : llvm::make_early_inc_range(module.getOps<MeshOp>()))
      mesh.erase();
  }

private:
  LogicalResult lower(func::FuncOp function) {
    // Only the entry points generated around the step are exported; a
    // private step lets bufferization drop the results it wrote in place.
    function.setPrivate();
    addContextAndScalarResults(function);
    if (failed(checkElementTypes(function, target)))
      return failure();
    for (const FrozenRewritePatternSet &patterns : sweeps)
      if (failed(sweep(function, patterns)))
        return failure();
    WalkResult left = function.walk([](Operation *op) {
      if (!isa<TPDialect>(op->getDialect()))
        return WalkResult::advance();
      op->emitOpError("has no runtime lowering: the partitioned program "
                      "holds only ops the runtime runs");
      return WalkResult::interrupt();
    });
    return failure(left.wasInterrupted());
  }

  static void removeTPAttributes(func::FuncOp function) {
    for (NamedAttribute attr : function->getDiscardableAttrs())
      if (isa_and_nonnull<TPDialect>(attr.getNameDialect()))
        function->removeDiscardableAttr(attr.getName());
    for (unsigned i = 0; i < function.getNumArguments(); ++i)
      for (NamedAttribute attr : function.getArgAttrDict(i)
                                     ? function.getArgAttrDict(i).getValue()
                                     : ArrayRef<NamedAttribute>())
        if (isa_and_nonnull<TPDialect>(attr.getNameDialect()))
          function.removeArgAttr(i, attr.getName());
    for (unsigned i = 0; i < function.getNumResults(); ++i)
      for (NamedAttribute attr : function.getResultAttrDict(i)
                                     ? function.getResultAttrDict(i).getValue()
                                     : ArrayRef<NamedAttribute>())
        if (isa_and_nonnull<TPDialect>(attr.getNameDialect()))
          function.removeResultAttr(i, attr.getName());
  }

  RuntimeTargetInfo target;
  SmallVector<FrozenRewritePatternSet, 2> sweeps;
};

} // namespace
