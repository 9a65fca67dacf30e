//===- Optimizer.cpp - AdamW with TP-aware clipping: the train step -------===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Transforms/Passes.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tp-optimizer"

namespace mlir::megatron {
#define GEN_PASS_DEF_OPTIMIZER
#include "megatron/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

struct Parameter {
  BlockArgument arg;
  StringAttr name;
  Value grad;
  /// Mesh axes the parameter is split over (its gradient's squares are
  /// all-reduced over them).
  SmallVector<StringRef> splitAxes;
};

class TrainStepBuilder {
public:
  TrainStepBuilder(func::FuncOp function, bool exportGrads)
      : function(function), exportGrads(exportGrads),
        b(function.getContext()) {}

  LogicalResult build() {
    auto ret = cast<func::ReturnOp>(function.front().getTerminator());
    if (failed(collectParameters(ret)))
      return failure();
    Location loc = function.getLoc();
    SmallVector<std::pair<BlockArgument, BlockArgument>> state;
    for (Parameter &param : params)
      state.push_back({addLike(param, MGT_ADAM_M_SUFFIX, ArgumentRole::AdamM),
                       addLike(param, MGT_ADAM_V_SUFFIX, ArgumentRole::AdamV)});
    SmallVector<BlockArgument> gradOutputs;
    if (exportGrads)
      for (Parameter &param : params)
        gradOutputs.push_back(addLike(param, ".grad", ArgumentRole::Grad));
    BlockArgument hyper = addArgument(
        RankedTensorType::get({MGT_HP_COUNT}, b.getF32Type()), "hyperparameters",
        ArgumentRole::Hyperparameters);

    b.setInsertionPoint(ret);
    Operation *last = ret->getPrevNode();
    Value norm = globalNorm(loc);
    Value scale = clipScale(loc, norm, hyper);
    SmallVector<Value> results = {ret.getOperand(0),
                                  tensor::FromElementsOp::create(
                                      b, loc, RankedTensorType::get({}, b.getF32Type()),
                                      norm)};
    SmallVector<std::pair<unsigned, BlockArgument>> updates;
    for (auto [param, moments] : llvm::zip(params, state)) {
      // Named after the parameter, so its update kernel is too.
      Location updateLoc = NameLoc::get(
          b.getStringAttr("adamw." + param.name.getValue()), loc);
      LLVM_DEBUG(llvm::dbgs() << "AdamW for " << param.name << "\n");
      auto adamw = AdamWOp::create(
          b, updateLoc, param.arg, param.grad, moments.first, moments.second, hyper,
          scale, /*decay=*/cast<RankedTensorType>(param.arg.getType()).getRank() == 2);
      for (auto [value, arg] :
           llvm::zip(adamw.getResults(),
                     std::array<BlockArgument, 3>{param.arg, moments.first,
                                                  moments.second})) {
        updates.push_back({results.size(), arg});
        results.push_back(value);
      }
    }
    for (auto [param, output] : llvm::zip(
             exportGrads ? ArrayRef<Parameter>(params) : ArrayRef<Parameter>(),
             gradOutputs)) {
      updates.push_back({results.size(), output});
      results.push_back(bufferization::MaterializeInDestinationOp::create(
                            b, loc, param.grad, output)
                            .getResult());
    }
    ret->setOperands(results);
    markPhase(last ? last->getNextNode() : &function.front().front(), ret,
              "optimizer");
    function.setType(b.getFunctionType(function.front().getArgumentTypes(),
                                       TypeRange(ValueRange(results))));
    // The gradients' tp.grad_of described the results this step replaced.
    function.setAllResultAttrs(ArrayRef<DictionaryAttr>(
        SmallVector<DictionaryAttr>(results.size(), b.getDictionaryAttr({}))));
    for (auto [index, arg] : updates)
      function.setResultAttr(index, TPDialect::kUpdatesAttrName,
                             b.getI64IntegerAttr(arg.getArgNumber()));
    return success();
  }

private:
  /// The parameters and their gradients, as tp-autodiff returned them.
  LogicalResult collectParameters(func::ReturnOp ret) {
    DenseMap<StringAttr, Value> gradOf;
    for (unsigned i = 1; i < ret.getNumOperands(); ++i)
      if (auto name = function.getResultAttrOfType<StringAttr>(
              i, TPDialect::kGradOfAttrName))
        gradOf[name] = ret.getOperand(i);
    if (gradOf.empty())
      return function.emitError("tp-optimizer needs the gradients tp-autodiff "
                                "returns (results with tp.grad_of)");
    SymbolTableCollection symbols;
    for (BlockArgument arg : function.getArguments()) {
      auto name = function.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), TPDialect::kNameAttrName);
      Value grad = name ? gradOf.lookup(name) : Value();
      if (!grad)
        continue;
      Parameter param{arg, name, grad, {}};
      if (ShardingAttr sharding = getSharding(arg))
        if (auto mesh = symbols.lookupNearestSymbolFrom<MeshOp>(
                function, sharding.getMesh()))
          for (unsigned dim = 0; dim < sharding.getDims().size(); ++dim)
            for (StringRef axis : sharding.getDimAxes(dim))
              if (mesh.getAxisSize(axis).value_or(1) > 1) {
                param.splitAxes.push_back(axis);
                meshRef = sharding.getMesh();
              }
      params.push_back(param);
    }
    // Only the loss stays; the optimizer's results follow it.
    ret->setOperands(ret.getOperand(0));
    return success();
  }

  BlockArgument addArgument(Type type, StringRef name, ArgumentRole role,
                            StringRef parameter = "") {
    unsigned index = function.getNumArguments();
    (void)function.insertArgument(index, type, {}, function.getLoc());
    function.setArgAttr(index, TPDialect::kNameAttrName, b.getStringAttr(name));
    setArgumentKind(function, index, role, parameter);
    return function.getArgument(index);
  }

  /// Optimizer state and gradients are laid out like their parameter.
  BlockArgument addLike(const Parameter &param, StringRef suffix,
                        ArgumentRole role) {
    BlockArgument arg =
        addArgument(param.arg.getType(), (param.name.getValue() + suffix).str(),
                    role, param.name.getValue());
    for (StringRef attr : {TPDialect::kShardingAttrName,
                           TPDialect::kGlobalShapeAttrName,
                           TPDialect::kUnpaddedShapeAttrName})
      if (Attribute value = function.getArgAttr(param.arg.getArgNumber(), attr))
        function.setArgAttr(arg.getArgNumber(), attr, value);
    return arg;
  }

  Value f32(Location loc, double value) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  }

  /// One tp.sum_squares per group: the runtime reads each group's total
  /// back once.
  Value sumOfSquares(Location loc, ValueRange grads) {
    if (grads.empty())
      return f32(loc, 0.0);
    return SumSquaresOp::create(b, loc, grads);
  }

  /// Each parameter counts once: a sharded gradient's squares are summed
  /// across its ranks, a replicated one's are the same on every rank.
  Value globalNorm(Location loc) {
    SmallVector<Value> shardedGrads, replicatedGrads;
    SmallVector<StringRef> axes;
    for (Parameter &param : params) {
      (param.splitAxes.empty() ? replicatedGrads : shardedGrads)
          .push_back(param.grad);
      for (StringRef axis : param.splitAxes)
        if (!llvm::is_contained(axes, axis))
          axes.push_back(axis);
    }
    Value sharded = sumOfSquares(loc, shardedGrads),
          replicated = sumOfSquares(loc, replicatedGrads);
    for (StringRef axis : axes) {
      auto vector = RankedTensorType::get({1}, b.getF32Type());
      Value packed = tensor::FromElementsOp::create(b, loc, vector, sharded);
      Value reduced = AllReduceOp::create(
          b, loc, packed, ReductionKindAttr::get(b.getContext(), ReductionKind::sum),
          meshRef, b.getStringAttr(axis));
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      sharded = tensor::ExtractOp::create(b, loc, reduced, zero);
    }
    return math::SqrtOp::create(b, loc,
                                arith::AddFOp::create(b, loc, sharded, replicated));
  }

  /// clip_grad_norm_: min(1, clip / (norm + 1e-6)) when clip > 0, else 1.
  Value clipScale(Location loc, Value norm, Value hyper) {
    Value index = arith::ConstantIndexOp::create(b, loc, MGT_HP_GRAD_CLIP);
    Value clip = tensor::ExtractOp::create(b, loc, hyper, index);
    Value coefficient = arith::DivFOp::create(
        b, loc, clip, arith::AddFOp::create(b, loc, norm, f32(loc, 1e-6)));
    Value clamped = arith::MinimumFOp::create(b, loc, coefficient, f32(loc, 1.0));
    Value enabled = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                          clip, f32(loc, 0.0));
    return arith::SelectOp::create(b, loc, enabled, clamped, f32(loc, 1.0));
  }

  func::FuncOp function;
  bool exportGrads;
  OpBuilder b;
  SmallVector<Parameter> params;
  FlatSymbolRefAttr meshRef;
};

struct OptimizerPass : public megatron::impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() && !isForwardEntry(function) &&
          failed(TrainStepBuilder(function, exportGrads).build()))
        return signalPassFailure();
  }
};

} // namespace
