//===- LoopResultsInPlace.cpp - unchanged loop buffers are their inits ----===//
#include "megatron/Lowering/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_LOOPRESULTSINPLACE
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

struct LoopResultsInPlacePass
    : public megatron::impl::LoopResultsInPlaceBase<LoopResultsInPlacePass> {
  void runOnOperation() override {
    getOperation().walk([](scf::ForOp loop) {
      auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
      for (auto [k, yielded] : llvm::enumerate(yield.getOperands()))
        if (yielded == loop.getRegionIterArg(k) &&
            isa<BaseMemRefType>(yielded.getType()))
          loop.getResult(k).replaceAllUsesWith(loop.getInitArgs()[k]);
    });
  }
};

} // namespace
