//===- MicroBatches.cpp - gradient accumulation as a loop -----------------===//
//
// tp-megatron-annotate splits each dp rank's rows again over an "mb" mesh
// axis of K micro-batches, so propagation, partition and autodiff see K
// more ranks: every parameter gets an f over "mb", whose gradient is summed
// over "mb", and the loss a g over "mb". Those K ranks are really one rank
// at K moments. This pass runs them one after another: what depends on the
// micro-batch becomes the body of a loop over K, a sum over "mb" becomes a
// value the loop carries and adds to, and what reads those sums (the dp
// reduction, the optimizer) runs once after the loop. Summing is the only
// collective a loop can stand in for; any other use of the axis is an
// error at the op.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tp-micro-batches"

namespace mlir::megatron {
#define GEN_PASS_DEF_MICROBATCHES
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

constexpr StringLiteral kAxis = megatron::kMicroBatchAxisName;

/// The sharding without the micro-batch axis.
ShardingAttr withoutAxis(ShardingAttr sharding) {
  MLIRContext *context = sharding.getContext();
  SmallVector<Attribute> dims;
  for (unsigned dim = 0; dim < sharding.getDims().size(); ++dim) {
    SmallVector<StringRef> axes = sharding.getDimAxes(dim);
    llvm::erase(axes, kAxis);
    dims.push_back(Builder(context).getStrArrayAttr(axes));
  }
  return ShardingAttr::get(context, sharding.getMesh(),
                           ArrayAttr::get(context, dims),
                           sharding.getPartial(), sharding.getSections());
}

/// One function's program, split into what runs once before the loop, once
/// per micro-batch, and once after it.
class MicroBatchLoop {
public:
  MicroBatchLoop(func::FuncOp function, int64_t count)
      : function(function), count(count), b(function.getContext()) {}

  LogicalResult build() {
    if (failed(findBatchArguments()) || failed(classify()))
      return failure();
    auto ret = cast<func::ReturnOp>(function.front().getTerminator());
    for (Value result : ret.getOperands())
      if (perBatch.contains(result))
        return ret.emitOpError("returns a value of one micro-batch: only "
                               "sums over \"")
               << kAxis << "\" leave the micro-batch loop";
    emitLoop(ret);
    updateSignature();
    return success();
  }

private:
  /// Arguments split over the axis: each micro-batch reads its rows, the
  /// innermost split of dimension 0 (the rank's rows are [k*b, (k+1)*b)).
  LogicalResult findBatchArguments() {
    for (BlockArgument arg : function.getArguments()) {
      ShardingAttr sharding = getSharding(arg);
      if (!sharding || !sharding.usesAxis(kAxis))
        continue;
      SmallVector<StringRef> rows = sharding.getDimAxes(0);
      if (rows.empty() || rows.back() != kAxis ||
          withoutAxis(sharding).usesAxis(kAxis))
        return emitError(arg.getLoc())
               << "argument #" << arg.getArgNumber() << " is laid out "
               << sharding << ": micro-batches split only dimension 0, "
               << "innermost";
      perBatch.insert(arg);
      batchArgs.push_back(arg);
    }
    return success();
  }

  /// Replaces f over the axis (the identity, once differentiated) by its
  /// input, and files every op: a sum over the axis, what reads a sum
  /// (after the loop), what reads a micro-batch (in the loop), the rest
  /// (before the loop).
  LogicalResult classify() {
    for (Operation &op :
         llvm::make_early_inc_range(function.front().without_terminator())) {
      if (auto collective = dyn_cast<CollectiveOpInterface>(op);
          collective && collective.getCollectiveAxis() == kAxis) {
        if (failed(fileCollective(collective)))
          return failure();
        continue;
      }
      // The rank's micro-batch is the loop's iteration (a dropout's place
      // in the global batch); what reads it runs in the loop.
      if (auto index = dyn_cast<AxisIndexOp>(op);
          index && index.getAxis() == kAxis) {
        perBatch.insert(index.getResult());
        iterations.push_back(index);
        continue;
      }
      bool readsSum = llvm::any_of(op.getOperands(), [&](Value v) {
        return afterLoop.contains(v);
      });
      bool readsBatch = llvm::any_of(op.getOperands(), [&](Value v) {
        return perBatch.contains(v);
      });
      if (readsSum && readsBatch)
        return op.emitOpError("reads both a sum over micro-batches and a "
                              "value of one micro-batch");
      DenseSet<Value> &set = readsSum ? afterLoop : perBatch;
      if (readsSum || readsBatch) {
        (readsSum ? tail : body).push_back(&op);
        set.insert(op.result_begin(), op.result_end());
      }
    }
    return success();
  }

  LogicalResult fileCollective(CollectiveOpInterface collective) {
    Operation *op = collective.getOperation();
    if (collective.getCollectiveKind() == CollectiveKind::identity) {
      op->getResult(0).replaceAllUsesWith(op->getOperand(0));
      op->erase();
      return success();
    }
    if (!isSum(collective))
      return op->emitOpError("runs over the micro-batch axis \"")
             << kAxis << "\", which is a loop: only a sum can be accumulated";
    if (afterLoop.contains(op->getOperand(0)))
      return op->emitOpError("sums over micro-batches a value already summed "
                             "over them");
    if (!isa<FloatType>(getElementTypeOrSelf(op->getOperand(0).getType())))
      return op->emitOpError("sums a non-float value over micro-batches");
    sums.push_back(op);
    afterLoop.insert(op->getResult(0));
    while (succeeded(sumOtherAxesAfterLoop(op)))
      ;
    return success();
  }

  static bool isSum(CollectiveOpInterface collective) {
    return collective.getCollectiveKind() == CollectiveKind::all_reduce &&
           collective.getCollectiveReduction() == ReductionKind::sum;
  }

  /// Sums commute: a sum over another axis (the loss's over "dp") that only
  /// the micro-batch sum reads moves after it, out of the loop, and runs
  /// once per step instead of once per micro-batch.
  LogicalResult sumOtherAxesAfterLoop(Operation *sum) {
    Value term = sum->getOperand(0);
    auto inner = term.getDefiningOp<CollectiveOpInterface>();
    if (!inner || !isSum(inner) || !term.hasOneUse() ||
        !perBatch.contains(term))
      return failure();
    Operation *moved = inner.getOperation();
    sum->setOperand(0, moved->getOperand(0));
    sum->getResult(0).replaceAllUsesWith(term);
    moved->setOperand(0, sum->getResult(0));
    moved->moveAfter(sum);
    llvm::erase(body, moved);
    perBatch.erase(term);
    afterLoop.insert(term);
    tail.push_back(moved);
    return success();
  }

  /// The loop replaces the sums; it goes last, with what reads the sums
  /// after it, so that everything it uses is defined before it.
  void emitLoop(func::ReturnOp ret) {
    Location loc = function.getLoc();
    b.setInsertionPoint(ret);
    SmallVector<Value> zeros;
    for (Operation *sum : sums)
      zeros.push_back(zeroCarried(sum->getLoc(), sum->getResult(0).getType()));
    Value lower = arith::ConstantIndexOp::create(b, loc, 0);
    Value upper = arith::ConstantIndexOp::create(b, loc, count);
    Value step = arith::ConstantIndexOp::create(b, loc, 1);
    auto loop = scf::ForOp::create(
        b, loc, lower, upper, step, zeros,
        [](OpBuilder &nested, Location loc, Value, ValueRange sums) {
          scf::YieldOp::create(nested, loc, sums);
        });
    Operation *yield = loop.getBody()->getTerminator();
    b.setInsertionPoint(yield);
    sliceBatchArguments(loop);
    for (Operation *op : body)
      op->moveBefore(yield);
    for (AxisIndexOp index : iterations) {
      perBatch.erase(index.getResult());
      index.getResult().replaceAllUsesWith(loop.getInductionVar());
      index.erase();
    }
    SmallVector<Value> partial;
    for (auto [sum, carried] : llvm::zip(sums, loop.getRegionIterArgs()))
      partial.push_back(addTo(carried, sum));
    yield->setOperands(partial);
    b.setInsertionPointAfter(loop);
    for (auto [sum, total] : llvm::zip(sums, loop.getResults())) {
      Value result = total;
      if (isScalar(sum))
        result = tensor::FromElementsOp::create(
            b, sum->getLoc(), sum->getResult(0).getType(), total);
      sum->getResult(0).replaceAllUsesWith(result);
      sum->erase();
    }
    for (Operation *op : tail)
      op->moveBefore(ret);
  }

  /// A 0-d sum (the loss) is carried as a scalar: on a GPU target a 0-d
  /// tensor would live in device memory, and the host reads the loss.
  static bool isScalar(Operation *sum) {
    return cast<RankedTensorType>(sum->getResult(0).getType()).getRank() == 0;
  }

  Value zeroCarried(Location loc, Type type) {
    auto tensor = cast<RankedTensorType>(type);
    if (tensor.getRank() == 0)
      return arith::ConstantOp::create(
          b, loc, b.getFloatAttr(tensor.getElementType(), 0.0));
    return buildZeros(b, loc, type);
  }

  /// The carried value plus this micro-batch's term of `sum`.
  Value addTo(Value carried, Operation *sum) {
    Location loc = sum->getLoc();
    Value term = sum->getOperand(0);
    Operation *add;
    if (isScalar(sum))
      add = arith::AddFOp::create(
          b, loc, carried, tensor::ExtractOp::create(b, loc, term, ValueRange()));
    else
      add = AddOp::create(b, loc, carried, term);
    add->setDiscardableAttrs(sum->getDiscardableAttrDictionary());
    return add->getResult(0);
  }

  /// Micro-batch k of each batch argument: its rows [k*b, (k+1)*b).
  void sliceBatchArguments(scf::ForOp loop) {
    for (BlockArgument arg : batchArgs) {
      auto type = cast<RankedTensorType>(arg.getType());
      Location loc = arg.getLoc();
      Value rows = arith::ConstantIndexOp::create(b, loc, type.getDimSize(0));
      Value first = arith::MulIOp::create(b, loc, loop.getInductionVar(), rows);
      SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0)),
          sizes, strides(type.getRank(), b.getIndexAttr(1));
      offsets[0] = first;
      for (int64_t size : type.getShape())
        sizes.push_back(b.getIndexAttr(size));
      // The full-size argument the function will take; its type changes
      // once every user reads the slice.
      Value slice = tensor::ExtractSliceOp::create(b, loc, type, arg, offsets,
                                                   sizes, strides);
      arg.replaceAllUsesExcept(slice, slice.getDefiningOp());
    }
  }

  /// The batch arguments hold the rank's K micro-batches.
  void updateSignature() {
    for (BlockArgument arg : batchArgs) {
      auto type = cast<RankedTensorType>(arg.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= count;
      arg.setType(type.clone(shape));
      setSharding(arg, withoutAxis(getSharding(arg)));
    }
    function.setType(b.getFunctionType(function.front().getArgumentTypes(),
                                       function.getResultTypes()));
  }

  func::FuncOp function;
  int64_t count;
  OpBuilder b;
  SmallVector<BlockArgument> batchArgs;
  DenseSet<Value> perBatch, afterLoop;
  SmallVector<Operation *> body, tail, sums;
  /// The rank's index along the axis: the loop's induction variable.
  SmallVector<AxisIndexOp> iterations;
};

/// The mesh without the axis, which only the loop now stands for.
void dropAxis(MeshOp mesh) {
  SmallVector<StringRef> names;
  SmallVector<int64_t> sizes;
  for (auto [name, size] :
       llvm::zip(mesh.getAxisNames().getAsValueRange<StringAttr>(),
                 mesh.getAxisSizes()))
    if (name != kAxis) {
      names.push_back(name);
      sizes.push_back(size);
    }
  Builder b(mesh.getContext());
  mesh.setAxisNamesAttr(b.getStrArrayAttr(names));
  mesh.setAxisSizesAttr(b.getDenseI64ArrayAttr(sizes));
}

struct MicroBatchesPass
    : public megatron::impl::MicroBatchesBase<MicroBatchesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(tp::verifyProgramDialects(getOperation(), getArgument())))
      return signalPassFailure();
    for (auto mesh : module.getOps<MeshOp>()) {
      std::optional<int64_t> count = mesh.getAxisSize(kAxis);
      if (!count)
        continue;
      for (auto function : module.getOps<func::FuncOp>())
        if (!function.isExternal() &&
            failed(MicroBatchLoop(function, *count).build()))
          return signalPassFailure();
      dropAxis(mesh);
    }
  }
};

} // namespace
