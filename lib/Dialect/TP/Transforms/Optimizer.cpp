//===- Optimizer.cpp - AdamW with TP-aware clipping: the train step -------===//
#include "megatron/Dialect/TP/Utils/LayerLocations.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "megatron/Dialect/TP/IR/ShardingUtils.h"

#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#include <map>

#define DEBUG_TYPE "tp-optimizer"

namespace mlir::megatron {
#define GEN_PASS_DEF_OPTIMIZER
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

struct Parameter {
  BlockArgument arg;
  StringAttr name;
  Value grad;
  /// Mesh axes the gradient AdamW reads is split over (its squares are
  /// all-reduced over them).
  SmallVector<StringRef> splitAxes;
  /// ZeRO-1: the AdamW state holds this dp rank's rows (dimension 0) only.
  bool stateSplitOverDp = false;
};

constexpr StringLiteral kDataAxis = MGT_AXIS_NAME_DP;

class TrainStepBuilder {
public:
  TrainStepBuilder(func::FuncOp function, bool exportGrads, int64_t zero)
      : function(function), exportGrads(exportGrads), zero(zero),
        b(function.getContext()) {}

  LogicalResult build() {
    auto ret = cast<func::ReturnOp>(function.front().getTerminator());
    if (failed(collectParameters(ret)))
      return failure();
    if (zero == 1)
      for (Parameter &param : params)
        splitStateOverDp(param);
    Location loc = function.getLoc();
    SmallVector<std::pair<unsigned, unsigned>> stateIndices;
    for (Parameter &param : params)
      stateIndices.push_back(
          {addState(param, MGT_ADAM_M_SUFFIX, ArgumentRole::AdamM),
           addState(param, MGT_ADAM_V_SUFFIX, ArgumentRole::AdamV)});
    SmallVector<unsigned> gradIndices;
    if (exportGrads)
      for (Parameter &param : params)
        gradIndices.push_back(addLike(param, ".grad", ArgumentRole::Grad));
    unsigned hyperIndex = addArgument(
        RankedTensorType::get({MGT_HP_COUNT}, b.getF32Type()), "hyperparameters",
        ArgumentRole::Hyperparameters);
    insertNewArguments();
    SmallVector<std::pair<BlockArgument, BlockArgument>> state;
    for (auto [m, v] : stateIndices)
      state.push_back({function.getArgument(m), function.getArgument(v)});
    SmallVector<BlockArgument> gradOutputs;
    for (unsigned index : gradIndices)
      gradOutputs.push_back(function.getArgument(index));
    BlockArgument hyper = function.getArgument(hyperIndex);
    // The step's seed and step key every dropout mask, forward and backward.
    function.walk([&](DropoutOpInterface op) {
      if (op.hasDropout())
        op.bindKey(hyper);
    });

    b.setInsertionPoint(ret);
    Operation *last = ret->getPrevNode();
    Value norm = globalNorm(loc);
    Value scale = clipScale(loc, norm, hyper);
    // A step whose loss or gradient norm is not finite leaves the parameters
    // and their state as they were: the launcher then stops, or goes on
    // without the update (--on-nonfinite).
    Value apply = bothFinite(loc, ret.getOperand(0), norm);
    SmallVector<Value> results = {ret.getOperand(0),
                                  tensor::FromElementsOp::create(
                                      b, loc, RankedTensorType::get({}, b.getF32Type()),
                                      norm)};
    SmallVector<std::pair<unsigned, BlockArgument>> updates;
    // ZeRO-1's gathered rows, by their result, written back at the end.
    SmallVector<std::pair<unsigned, BlockArgument>> gathered;
    for (auto [param, moments] : llvm::zip(params, state)) {
      // Named after the parameter, so its update kernel is too.
      Location updateLoc = megatron::inLayerOf(
          param.arg,
          NameLoc::get(b.getStringAttr("adamw." + param.name.getValue()), loc));
      LLVM_DEBUG(llvm::dbgs() << "AdamW for " << param.name << "\n");
      Value rows = param.stateSplitOverDp
                       ? LocalSliceOp::create(b, updateLoc, param.grad.getType(),
                                              param.arg, meshRef, b.getStringAttr(kDataAxis),
                                              b.getI64IntegerAttr(0))
                             .getResult()
                       : Value(param.arg);
      auto adamw = AdamWOp::create(
          b, updateLoc, rows, param.grad, moments.first, moments.second, hyper,
          scale, apply, /*decay=*/cast<RankedTensorType>(param.arg.getType()).getRank() == 2);
      Value updated = adamw.getResult(0);
      if (param.stateSplitOverDp) {
        updated = AllGatherOp::create(b, updateLoc, param.arg.getType(),
                                      updated, meshRef,
                                      b.getStringAttr(kDataAxis),
                                      b.getI64IntegerAttr(0));
        gathered.push_back({results.size(), param.arg});
      }
      for (auto [value, arg] :
           llvm::zip(std::array<Value, 3>{updated, adamw.getResult(1),
                                          adamw.getResult(2)},
                     std::array<BlockArgument, 3>{param.arg, moments.first,
                                                  moments.second})) {
        updates.push_back({results.size(), arg});
        results.push_back(value);
      }
    }
    // The gathered rows are written back into their parameters, which the
    // results update in place, after every update: a gather then runs
    // while the later parameters are updated (tp-overlap-collectives). The
    // writes belong to no one layer's run.
    for (auto [index, arg] : gathered)
      results[index] = bufferization::MaterializeInDestinationOp::create(
                           b, megatron::withoutLayer(results[index].getLoc()),
                           results[index], arg)
                           .getResult();
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
    // All set at once: one result at a time would copy them all each time.
    SmallVector<DictionaryAttr> resultAttrs(results.size(),
                                            b.getDictionaryAttr({}));
    for (auto [index, arg] : updates)
      resultAttrs[index] = b.getDictionaryAttr(
          b.getNamedAttr(TPDialect::kUpdatesAttrName,
                         b.getI64IntegerAttr(arg.getArgNumber())));
    function.setAllResultAttrs(resultAttrs);
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

  /// Queues an argument at the end of the function; returns the index it
  /// will have. insertNewArguments() adds them all in one go: one at a time,
  /// each insertion would copy the function's type and argument attributes,
  /// quadratic in the number of parameters.
  unsigned addArgument(Type type, StringRef name, ArgumentRole role,
                       StringRef parameter = "") {
    NamedAttrList attrs(
        getArgumentKindAttrs(function.getContext(), role, parameter));
    attrs.set(TPDialect::kNameAttrName, b.getStringAttr(name));
    newArguments.push_back({type, attrs});
    return function.getNumArguments() + newArguments.size() - 1;
  }

  void insertNewArguments() {
    SmallVector<unsigned> at(newArguments.size(), function.getNumArguments());
    SmallVector<Type> types;
    SmallVector<DictionaryAttr> attrs;
    for (const NewArgument &arg : newArguments) {
      types.push_back(arg.type);
      attrs.push_back(arg.attrs.getDictionary(function.getContext()));
    }
    SmallVector<Location> locs(newArguments.size(), function.getLoc());
    (void)function.insertArguments(at, types, attrs, locs);
    newArguments.clear();
  }

  /// Optimizer state and gradients are laid out like their parameter.
  unsigned addLike(const Parameter &param, StringRef suffix,
                   ArgumentRole role) {
    unsigned index =
        addArgument(param.arg.getType(), (param.name.getValue() + suffix).str(),
                    role, param.name.getValue());
    for (StringRef attr : {TPDialect::kShardingAttrName,
                           TPDialect::kGlobalShapeAttrName,
                           TPDialect::kUnpaddedShapeAttrName})
      if (Attribute value = function.getArgAttr(param.arg.getArgNumber(), attr))
        newArguments.back().attrs.set(attr, value);
    return index;
  }

  /// AdamW state is laid out like the gradient it reads: the parameter's
  /// layout, or with ZeRO-1 its dp rank's rows of it.
  unsigned addState(const Parameter &param, StringRef suffix,
                    ArgumentRole role) {
    unsigned index = addLike(param, suffix, role);
    if (param.stateSplitOverDp) {
      newArguments.back().type = param.grad.getType();
      newArguments.back().attrs.set(TPDialect::kShardingAttrName,
                                    withRowsOverDp(getSharding(param.arg)));
    }
    return index;
  }

  ShardingAttr withRowsOverDp(ShardingAttr sharding) {
    SmallVector<Attribute> dims(sharding.getDims().getValue());
    SmallVector<StringRef> rows = sharding.getDimAxes(0);
    rows.push_back(kDataAxis);
    dims[0] = b.getStrArrayAttr(rows);
    return ShardingAttr::get(b.getContext(), sharding.getMesh(),
                             b.getArrayAttr(dims), sharding.getPartial(),
                             sharding.getSections());
  }

  /// ZeRO-1: a gradient all-reduced over dp is reduce-scattered instead, so
  /// that each dp rank updates its rows, when dp divides them and the rows
  /// hold no sections (whose split the runtime's layout could not nest).
  void splitStateOverDp(Parameter &param) {
    auto reduce = param.grad.getDefiningOp<AllReduceOp>();
    if (!reduce || reduce.getAxis() != kDataAxis ||
        reduce.getKind() != ReductionKind::sum || !reduce->use_empty())
      return;
    SymbolTableCollection symbols;
    auto mesh =
        symbols.lookupNearestSymbolFrom<MeshOp>(function, reduce.getMeshAttr());
    ShardingAttr sharding = getSharding(param.arg);
    auto type = cast<RankedTensorType>(param.grad.getType());
    int64_t dp = mesh ? mesh.getAxisSize(kDataAxis).value_or(1) : 1;
    if (dp == 1 || !sharding || type.getRank() == 0 ||
        sharding.getDimSections(0) != 1 || type.getDimSize(0) % dp != 0)
      return;
    SmallVector<int64_t> shape(type.getShape());
    shape[0] /= dp;
    b.setInsertionPoint(reduce);
    param.grad = ReduceScatterOp::create(
        b, reduce.getLoc(), type.clone(shape), reduce.getInput(),
        ReductionKindAttr::get(b.getContext(), ReductionKind::sum),
        reduce.getMeshAttr(), b.getStringAttr(kDataAxis), b.getI64IntegerAttr(0));
    param.grad.getDefiningOp()->setDiscardableAttrs(
        reduce->getDiscardableAttrDictionary());
    meshRef = reduce.getMeshAttr();
    reduce.erase();
    param.splitAxes.push_back(kDataAxis);
    param.stateSplitOverDp = true;
  }

  /// Whether the 0-d `loss` and the scalar `norm` are both finite.
  Value bothFinite(Location loc, Value loss, Value norm) {
    Value lossScalar = tensor::ExtractOp::create(b, loc, loss, ValueRange());
    Value lossFinite = math::IsFiniteOp::create(b, loc, lossScalar);
    Value normFinite = math::IsFiniteOp::create(b, loc, norm);
    return arith::AndIOp::create(b, loc, lossFinite, normFinite);
  }

  Value f32(Location loc, double value) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  }

  /// Each parameter counts once: the squares of the gradients split over
  /// the same axes are summed on each rank and all-reduced over those axes;
  /// a replicated gradient's are the same on every rank.
  Value globalNorm(Location loc) {
    std::map<SmallVector<StringRef>, SmallVector<Value>> groups;
    for (Parameter &param : params) {
      SmallVector<StringRef> axes = param.splitAxes;
      llvm::sort(axes);
      axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
      groups[axes].push_back(param.grad);
    }
    Value total;
    for (auto &[axes, grads] : groups) {
      // One tp.sum_squares per group: the runtime reads its total back once.
      Value squares = SumSquaresOp::create(b, loc, grads);
      for (StringRef axis : axes)
        squares = allReduceScalar(loc, squares, axis);
      total = total ? arith::AddFOp::create(b, loc, total, squares) : squares;
    }
    return math::SqrtOp::create(b, loc, total ? total : f32(loc, 0.0));
  }

  Value allReduceScalar(Location loc, Value scalar, StringRef axis) {
    auto vector = RankedTensorType::get({1}, b.getF32Type());
    Value packed = tensor::FromElementsOp::create(b, loc, vector, scalar);
    Value reduced = AllReduceOp::create(
        b, loc, packed, ReductionKindAttr::get(b.getContext(), ReductionKind::sum),
        meshRef, b.getStringAttr(axis));
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    return tensor::ExtractOp::create(b, loc, reduced, zero);
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
  int64_t zero;
  OpBuilder b;
  SmallVector<Parameter> params;
  /// Arguments addArgument() queued for insertNewArguments().
  struct NewArgument {
    Type type;
    NamedAttrList attrs;
  };
  SmallVector<NewArgument> newArguments;
  FlatSymbolRefAttr meshRef;
};

struct OptimizerPass : public megatron::impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;
  void runOnOperation() override {
    if (failed(tp::verifyProgramDialects(getOperation(), getArgument())))
      return signalPassFailure();
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() && !isForwardEntry(function) &&
          failed(TrainStepBuilder(function, exportGrads, zero).build()))
        return signalPassFailure();
  }
};

} // namespace
