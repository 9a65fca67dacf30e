//===- OffloadToGPU.cpp - the step's loops as gpu.launch kernels ----------===//
#include "megatron/Conversion/Passes.h"

#include "mlir/Conversion/SCFToGPU/SCFToGPU.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_OFFLOADTOGPU
#include "megatron/Conversion/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

/// Parallel dimensions first: the reductions (a softmax's row sums)
/// then run as a loop inside each thread instead of around the kernel.
LogicalResult parallelDimensionsFirst(RewriterBase &rewriter,
                                      linalg::LinalgOp op) {
  auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
  if (!generic || generic.getNumReductionLoops() == 0)
    return success();
  SmallVector<unsigned> order;
  for (auto [dim, type] : llvm::enumerate(generic.getIteratorTypesArray()))
    if (type == utils::IteratorType::parallel)
      order.push_back(dim);
  for (auto [dim, type] : llvm::enumerate(generic.getIteratorTypesArray()))
    if (type != utils::IteratorType::parallel)
      order.push_back(dim);
  return interchangeGenericOp(rewriter, generic, order);
}

/// CUDA's grid limit in y and z.
constexpr int64_t kMaxGridYZ = 65535;

gpu::ParallelLoopDimMappingAttr mappingTo(MLIRContext *context,
                                          gpu::Processor processor) {
  AffineMap identity = AffineMap::getMultiDimIdentityMap(1, context);
  return gpu::ParallelLoopDimMappingAttr::get(context, processor, identity,
                                              identity);
}

/// Tiles the innermost dimension by `blockSize` threads and maps the tiles,
/// innermost first, to blockIdx.x, .y and .z: consecutive threads touch
/// consecutive elements of a row. An outer dimension longer than the grid
/// allows along y and z is cut into that many tiles, whose rows each
/// thread walks in a loop.
LogicalResult mapToGPU(scf::ParallelOp loop, int64_t blockSize) {
  unsigned rank = loop.getNumLoops();
  if (rank > 3)
    return loop.emitOpError("has ")
           << rank << " parallel dimensions; the CUDA target maps at most 3";
  SmallVector<int64_t> tileSizes(rank, 1);
  tileSizes.back() = blockSize;
  for (unsigned dim = 0; dim + 1 < rank; ++dim) {
    std::optional<int64_t> extent =
        getConstantIntValue(loop.getUpperBound()[dim]);
    if (!extent)
      return loop.emitOpError("dimension ")
             << dim << " has no static extent to size the grid with";
    tileSizes[dim] = llvm::divideCeil(*extent, kMaxGridYZ);
  }
  auto [tiles, threads] =
      scf::tileParallelLoop(loop, tileSizes, /*noMinMaxBounds=*/true);
  MLIRContext *context = loop.getContext();
  const gpu::Processor blocks[] = {gpu::Processor::BlockX,
                                   gpu::Processor::BlockY,
                                   gpu::Processor::BlockZ};
  SmallVector<gpu::ParallelLoopDimMappingAttr> tileMapping, threadMapping;
  for (unsigned dim = 0; dim < rank; ++dim) {
    tileMapping.push_back(mappingTo(context, blocks[rank - 1 - dim]));
    threadMapping.push_back(mappingTo(context, dim + 1 == rank
                                                   ? gpu::Processor::ThreadX
                                                   : gpu::Processor::Sequential));
  }
  if (failed(gpu::setMappingAttr(tiles, tileMapping)) ||
      failed(gpu::setMappingAttr(threads, threadMapping)))
    return loop.emitOpError("cannot be mapped to the GPU");
  return success();
}

LogicalResult linalgToKernels(func::FuncOp function, int64_t blockSize) {
  IRRewriter rewriter(function.getContext());
  SmallVector<linalg::LinalgOp> ops;
  function.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
  for (linalg::LinalgOp op : ops) {
    // Loops come from buffers: upstream's loop generation cannot take
    // tensors (it would write into values).
    if (!op.hasPureBufferSemantics())
      return op.emitOpError("works on tensors: megatron-offload-to-gpu runs "
                            "on the bufferized step (after one-shot "
                            "bufferization)");
    if (failed(parallelDimensionsFirst(rewriter, op)))
      return op.emitOpError("cannot put its parallel dimensions first");
  }
  ops.clear();
  function.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
  for (linalg::LinalgOp op : ops) {
    rewriter.setInsertionPoint(op);
    FailureOr<linalg::LinalgLoops> loops =
        linalg::linalgOpToParallelLoops(rewriter, op);
    if (failed(loops))
      return op.emitOpError("cannot be lowered to parallel loops");
    rewriter.eraseOp(op);
    if (loops->empty())
      continue;
    auto outermost = dyn_cast<scf::ParallelOp>(loops->front());
    // With no parallel dimension the whole op would run on the host; the
    // check below reports the loads it left there.
    if (outermost && failed(mapToGPU(outermost, blockSize)))
      return failure();
  }
  return success();
}

LogicalResult launchMappedLoops(ModuleOp module) {
  MLIRContext *context = module.getContext();
  RewritePatternSet patterns(context);
  populateParallelLoopToGPUPatterns(patterns);
  ConversionTarget target(*context);
  target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
  configureParallelLoopToGPULegality(target);
  if (failed(applyPartialConversion(module, target, std::move(patterns))))
    return failure();
  finalizeParallelLoopToGPUConversion(module);
  return success();
}

/// The first name in `loc` (gpt2-mlir names every op after its module, e.g.
/// "h.3.mlp.c_fc"), as a C identifier.
std::string locationName(Location loc) {
  std::string name;
  loc->walk([&](Location inner) {
    if (auto named = dyn_cast<NameLoc>(inner)) {
      name = named.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  for (char &c : name)
    if (!llvm::isAlnum(c))
      c = '_';
  return name;
}

/// Kernels are named after the model op they compute, so profiles and the
/// PTX read as the model; all of a module's kernels go in one GPU module,
/// loaded once.
std::pair<FlatSymbolRefAttr, FlatSymbolRefAttr>
kernelSymbols(gpu::LaunchOp launch, func::FuncOp function, unsigned index) {
  MLIRContext *context = launch.getContext();
  std::string op = locationName(launch.getLoc());
  std::string name = (function.getName() + "_" + Twine(index) +
                      (op.empty() ? "" : "_" + op))
                         .str();
  return {FlatSymbolRefAttr::get(context, "megatron_kernels"),
          FlatSymbolRefAttr::get(context, name)};
}

/// Makes the function's launches one chain of async tokens that starts at
/// its entry and is waited for before it returns: every launch goes on the
/// stream the chain's `gpu.wait async` obtains (the runtime hands out the
/// rank's stream, where its own kernels run too), with no host
/// synchronisation between launches; the stream orders them after the
/// runtime's own kernels too. An iteration of a loop (the micro-batch loop)
/// waits for its launches before the next, the cost of one host
/// synchronisation per micro-batch.
class LaunchChain {
public:
  explicit LaunchChain(func::FuncOp function)
      : function(function), rewriter(function.getContext()),
        tokenType(gpu::AsyncTokenType::get(function.getContext())) {}

  LogicalResult run() {
    if (!hasLaunch(function))
      return success();
    rewriter.setInsertionPointToStart(&function.front());
    Value token =
        gpu::WaitOp::create(rewriter, function.getLoc(), tokenType, ValueRange())
            .getAsyncToken();
    FailureOr<Value> last = chain(function.front(), token);
    if (failed(last))
      return failure();
    function.walk([&](func::ReturnOp ret) {
      rewriter.setInsertionPoint(ret);
      gpu::WaitOp::create(rewriter, ret.getLoc(), Type(), ValueRange{*last});
    });
    return success();
  }

private:
  static bool hasLaunch(Operation *op) {
    return op->walk([](gpu::LaunchOp) { return WalkResult::interrupt(); })
        .wasInterrupted();
  }

  /// Chains the launches of `block` after `token`; the chain's last token.
  FailureOr<Value> chain(Block &block, Value token) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (auto launch = dyn_cast<gpu::LaunchOp>(op)) {
        token = chainLaunch(launch, token);
        continue;
      }
      if (op.getNumRegions() == 0 || !hasLaunch(&op))
        continue;
      // Each iteration chains from the token before the loop and waits for
      // its last launch before the next begins, so nothing after the loop
      // needs a token from inside it.
      auto loop = dyn_cast<scf::ForOp>(op);
      if (!loop)
        return op.emitOpError("holds kernels, which only a loop's body or "
                              "the function's may");
      FailureOr<Value> last = chain(*loop.getBody(), token);
      if (failed(last))
        return failure();
      rewriter.setInsertionPoint(loop.getBody()->getTerminator());
      gpu::WaitOp::create(rewriter, loop.getLoc(), Type(), ValueRange{*last});
    }
    return token;
  }

  Value chainLaunch(gpu::LaunchOp launch, Value token) {
    rewriter.setInsertionPoint(launch);
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues(),
                    block = launch.getBlockSizeOperandValues();
    auto [module, kernel] = kernelSymbols(launch, function, launchCount++);
    auto chained = gpu::LaunchOp::create(
        rewriter, launch.getLoc(), grid.x, grid.y, grid.z, block.x, block.y,
        block.z, launch.getDynamicSharedMemorySize(), tokenType,
        ValueRange{token},
        /*workgroupAttributions=*/{}, /*privateAttributions=*/{},
        /*clusterSizeX=*/nullptr, /*clusterSizeY=*/nullptr,
        /*clusterSizeZ=*/nullptr, module, kernel);
    chained.getBody().takeBody(launch.getBody());
    rewriter.eraseOp(launch);
    return chained.getAsyncToken();
  }

  func::FuncOp function;
  IRRewriter rewriter;
  Type tokenType;
  unsigned launchCount = 0;
};

/// An argument the host code alone reads (the hyperparameters): the
/// runtime keeps it in host memory. A function it is passed to (an
/// outlined layer's AdamW) must read it on the host alone too.
bool isHostOnlyArgument(BlockArgument argument) {
  return llvm::all_of(argument.getUses(), [](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto call = dyn_cast<func::CallOp>(user)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      return callee && !callee.isExternal() &&
             isHostOnlyArgument(callee.getArgument(use.getOperandNumber()));
    }
    return isa<memref::LoadOp>(user) && !user->getParentOfType<gpu::LaunchOp>();
  });
}

/// Host code may read only host-only arguments; every other buffer is
/// device memory.
LogicalResult checkHostAccesses(func::FuncOp function) {
  Block &entry = function.front();
  WalkResult result =
      function.walk<WalkOrder::PreOrder>([&](Operation *op) -> WalkResult {
    if (isa<gpu::LaunchOp>(op))
      return WalkResult::skip();
    Value buffer;
    if (auto load = dyn_cast<memref::LoadOp>(op))
      buffer = load.getMemRef();
    else if (auto store = dyn_cast<memref::StoreOp>(op))
      buffer = store.getMemRef();
    else
      return WalkResult::advance();
    auto argument = dyn_cast<BlockArgument>(buffer);
    if (argument && argument.getOwner() == &entry &&
        isHostOnlyArgument(argument))
      return WalkResult::advance();
    op->emitOpError(argument && argument.getOwner() == &entry
                        ? "uses an argument on the host that is not only "
                          "read there (only such arguments, the "
                          "hyperparameters, stay in host memory)"
                        : "would access device memory from the host");
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

struct OffloadToGPUPass
    : public megatron::impl::OffloadToGPUBase<OffloadToGPUPass> {
  using OffloadToGPUBase::OffloadToGPUBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (blockSize <= 0 || blockSize > 1024) {
      module.emitError("block-size must be in [1, 1024], got ")
          << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> functions = megatron::definedFunctions(module);
    for (func::FuncOp function : functions) {
      if (failed(linalgToKernels(function, blockSize)))
        return signalPassFailure();
    }
    if (failed(launchMappedLoops(module)))
      return signalPassFailure();
    for (func::FuncOp function : functions) {
      if (failed(checkHostAccesses(function)) ||
          failed(LaunchChain(function).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
