//===- Predict.cpp - predicted step time at several TP sizes --------------===//
#include "megatron/Analysis/Passes.h"
#include "megatron/Analysis/PerformanceModel.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Dialect/TP/Utils/Utils.h"
#include "megatron_rt/contract.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_PREDICT
#include "megatron/Analysis/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;

namespace {

struct PredictPass : public megatron::impl::PredictBase<PredictPass> {
  using PredictBase::PredictBase;

  void runOnOperation() override {
    if (failed(tp::verifyGlobalProgram(getOperation(), getArgument())))
      return signalPassFailure();
    for (const std::string &axis : overlap)
      if (axis != MGT_AXIS_NAME_TP && axis != MGT_AXIS_NAME_DP) {
        getOperation().emitError("tp-predict: overlap names '")
            << axis
            << "'; the axes are " MGT_AXIS_NAME_TP " and " MGT_AXIS_NAME_DP;
        return signalPassFailure();
      }
    if (tpSizes.empty()) {
      getOperation().emitError(
          "tp-predict: no tp sizes to predict; give them as tp=1,2,...");
      return signalPassFailure();
    }
    std::string error;
    FailureOr<Hardware> found = lookupHardware(hardware, error);
    if (failed(found)) {
      getOperation().emitError("tp-predict: hardware ") << error;
      return signalPassFailure();
    }
    llvm::outs() << llvm::formatv("predicted {0} step on {1}\n",
                                  train ? "training" : "forward", found->name)
                 << llvm::formatv(
                        "{0,4} {1,4} {2,10} {3,10} {4,10} {5,10} {6,14}\n",
                        "tp", "dp", "step s", "compute", "memory", "comm",
                        "TFLOP/s/rank");
    SmallVector<int64_t> dps(dpSizes.begin(), dpSizes.end());
    if (dps.empty())
      dps.push_back(1);
    for (int64_t dp : dps)
      for (int64_t tp : tpSizes)
        predict(tp, dp, *found);
  }

  /// The `overlap` axes the layout's mesh has: only axes of size > 1 are
  /// created, and a size-1 axis has no collectives to overlap.
  SmallVector<std::string> overlappedAxes(int64_t tp, int64_t dp) const {
    SmallVector<std::string> axes;
    for (const std::string &axis : overlap)
      if ((axis == MGT_AXIS_NAME_TP ? tp : dp) > 1)
        axes.push_back(axis);
    return axes;
  }

  /// Partitions a copy of the program for `tp` x `dp` and prints one row.
  void predict(int64_t tp, int64_t dp, const Hardware &hw) {
    ModuleOp module = getOperation();
    // A copy nested in the module, so the pipeline may run on it.
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto copy = ModuleOp::create(b, module.getLoc());
    IRMapping mapping;
    for (Operation &op : llvm::make_early_inc_range(
             module.getBody()->without_terminator()))
      if (&op != copy.getOperation())
        copy.getBody()->push_back(op.clone(mapping));

    OpPassManager pm(ModuleOp::getOperationName());
    MegatronAnnotateOptions layout;
    layout.tp = tp;
    layout.dp = dp;
    buildMegatronPipeline(pm, layout, /*exportLogits=*/false);
    if (train) {
      pm.addPass(createAutodiff());
      if (recompute)
        pm.addPass(createRecomputeLayers());
      pm.addPass(createOptimizer());
      pm.addPass(createBucketReductions());
    }
    if (SmallVector<std::string> axes = overlappedAxes(tp, dp); !axes.empty())
      pm.addPass(createOverlapCollectives(OverlapCollectivesOptions{axes}));
    std::string reason;
    LogicalResult result = success();
    {
      // Why a size cannot be used is a row of the table, not an error.
      ScopedDiagnosticHandler capture(&getContext(), [&](Diagnostic &diag) {
        if (diag.getSeverity() == DiagnosticSeverity::Error && reason.empty())
          reason = diag.str();
        return success();
      });
      result = runPipeline(pm, copy);
    }
    if (failed(result)) {
      llvm::outs() << llvm::formatv("{0,4} {1,4} not possible: {2}\n", tp, dp,
                                    reason);
    } else {
      StepTime time = predictStepTime(copy, hw);
      int64_t flops = 0;
      copy.walk([&](Operation *op) { flops += countModelFlops(op); });
      llvm::outs() << llvm::formatv(
          "{0,4} {1,4} {2,10:f4} {3,10:f4} {4,10:f4} {5,10:f4} {6,14:f1}\n", tp,
          dp, time.total(), time.compute, time.memory, time.communication,
          flops / time.total() / 1e12);
    }
    copy.erase();
  }
};

} // namespace
