//===- GPULaunchToHostLoops.cpp - kernels as host loops, for checking -----===//
#include "megatron/Conversion/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_GPULAUNCHTOHOSTLOOPS
#include "megatron/Conversion/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

/// Loops z, y, x over the grid, then over the block; the body sees the loop
/// variables as its block and thread ids.
LogicalResult launchAsLoops(gpu::LaunchOp launch) {
  // Every gpu op in a body (barriers, shuffles, subgroup reductions, dynamic
  // shared memory) makes threads work together; the offloaded loops have
  // none, and one thread at a time could not run them.
  bool cooperates = false;
  launch.getBody().walk([&](Operation *op) {
    cooperates |= isa<gpu::GPUDialect>(op->getDialect()) &&
                  !isa<gpu::TerminatorOp>(op);
  });
  if (cooperates || !launch.getWorkgroupAttributions().empty() ||
      !launch.getPrivateAttributions().empty() || launch.hasClusterSize())
    return launch.emitOpError(
        "synchronises or shares memory: its threads cannot run one by one");
  Region &body = launch.getBody();
  if (!body.hasOneBlock())
    return launch.emitOpError("has more than one block");
  OpBuilder b(launch);
  Location loc = launch.getLoc();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues(),
                  block = launch.getBlockSizeOperandValues();
  SmallVector<Value> extents = {grid.z, grid.y, grid.x,
                                block.z, block.y, block.x};
  SmallVector<Value> ivs;
  for (Value extent : extents) {
    auto loop = scf::ForOp::create(b, loc, zero, extent, one);
    ivs.push_back(loop.getInductionVar());
    b.setInsertionPointToStart(loop.getBody());
  }
  IRMapping mapping;
  gpu::KernelDim3 blockIds = launch.getBlockIds(),
                  threadIds = launch.getThreadIds(),
                  gridSize = launch.getGridSize(),
                  blockSize = launch.getBlockSize();
  mapping.map(blockIds.z, ivs[0]);
  mapping.map(blockIds.y, ivs[1]);
  mapping.map(blockIds.x, ivs[2]);
  mapping.map(threadIds.z, ivs[3]);
  mapping.map(threadIds.y, ivs[4]);
  mapping.map(threadIds.x, ivs[5]);
  for (auto [inside, outside] :
       llvm::zip(SmallVector<Value>{gridSize.x, gridSize.y, gridSize.z,
                                    blockSize.x, blockSize.y, blockSize.z},
                 SmallVector<Value>{grid.x, grid.y, grid.z, block.x, block.y,
                                    block.z}))
    mapping.map(inside, outside);
  for (Operation &op : body.front().without_terminator())
    b.clone(op, mapping);
  if (Value token = launch.getAsyncToken()) {
    // The loops ran before anything after them: the token's users may
    // have the launch's dependency, or a fresh token when it had none.
    b.setInsertionPoint(launch);
    Value done = launch.getAsyncDependencies().empty()
                     ? gpu::WaitOp::create(b, loc, token.getType(), ValueRange())
                           .getAsyncToken()
                     : launch.getAsyncDependencies().front();
    token.replaceAllUsesWith(done);
  }
  launch.erase();
  return success();
}

struct GPULaunchToHostLoopsPass
    : public megatron::impl::GPULaunchToHostLoopsBase<GPULaunchToHostLoopsPass> {
  void runOnOperation() override {
    SmallVector<gpu::LaunchOp> launches;
    getOperation().walk([&](gpu::LaunchOp launch) { launches.push_back(launch); });
    for (gpu::LaunchOp launch : launches)
      if (failed(launchAsLoops(launch)))
        return signalPassFailure();
    // The tokens only ordered launches; the host loops are ordered already.
    SmallVector<gpu::WaitOp> waits;
    getOperation().walk([&](gpu::WaitOp wait) { waits.push_back(wait); });
    for (gpu::WaitOp wait : llvm::reverse(waits)) {
      if (wait.getAsyncToken() && !wait.getAsyncToken().use_empty())
        return (void)(wait.emitOpError("has a token still in use"),
                      signalPassFailure());
      wait.erase();
    }
  }
};

} // namespace
