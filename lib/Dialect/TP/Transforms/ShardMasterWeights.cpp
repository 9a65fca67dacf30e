//===- ShardMasterWeights.cpp - bf16 parameters, fp32 masters over dp -----===//
//
// After tp-mixed-precision every parameter is stored in fp32 on every rank
// and rounded to bf16 once per step. With ZeRO-1 a rank updates only its dp
// rows of a parameter (tp-optimizer: a tp.local_slice over "dp" feeding
// tp.adamw, whose rows tp.all_gather writes back), so the fp32 values of the
// other rows serve nothing but that rounding. Megatron-LM's distributed
// optimizer keeps the model's parameters in bf16 and their fp32 master
// weights, like the moments, in shards over dp. This pass does the same:
// such a parameter's argument becomes bf16 (what the forward and backward
// ops read, with no copy), a new argument (tp.role "master") holds the fp32
// rows, AdamW updates those rows in place, and their bf16 rounding is what
// the all-gather writes back, at half the bytes. A parameter's other entry
// functions (the kept forward step) take it in bf16 too.
//
//===----------------------------------------------------------------------===//
#include "megatron/Dialect/TP/Utils/LayerLocations.h"
#include "megatron/Dialect/TP/Utils/Utils.h"

#include "megatron/Dialect/TP/IR/ShardingUtils.h"

#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_SHARDMASTERWEIGHTS
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

/// A parameter ZeRO-1 updates by its dp rows: the slice AdamW reads, the
/// update, and the all-gather written back into the parameter.
struct RowUpdate {
  BlockArgument param;
  // Op handles are values; their accessors are not const.
  mutable LocalSliceOp rows;
  mutable AdamWOp adamw;
  mutable AllGatherOp gather;
};

bool isRowsOverDp(LocalSliceOp slice) {
  return slice.getAxis() == MGT_AXIS_NAME_DP && slice.getDim() == 0;
}

/// The ZeRO-1 update of `param`, if tp-optimizer made one.
std::optional<RowUpdate> findRowUpdate(BlockArgument param) {
  for (Operation *user : param.getUsers()) {
    auto rows = dyn_cast<LocalSliceOp>(user);
    if (!rows || !isRowsOverDp(rows) || !rows->hasOneUse())
      continue;
    auto adamw = dyn_cast<AdamWOp>(*rows->user_begin());
    if (!adamw || adamw.getParam() != rows.getResult())
      continue;
    for (Operation *reader : adamw.getNewParam().getUsers())
      if (auto gather = dyn_cast<AllGatherOp>(reader);
          gather && gather.getAxis() == MGT_AXIS_NAME_DP &&
          gather.getDim() == 0)
        return RowUpdate{param, rows, adamw, gather};
  }
  return std::nullopt;
}

RankedTensorType inBF16(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor.clone(BFloat16Type::get(type.getContext()));
}

/// Whether `value` is read only by bf16 copies (tp-mixed-precision's).
bool onlyCopiedToBF16(Value value) {
  return llvm::all_of(value.getUsers(), [&](Operation *user) {
    auto copy = dyn_cast<ConvertOp>(user);
    return copy && copy.getType() == inBF16(value.getType());
  });
}

/// Replaces the bf16 copy `copy` of a value now bf16 itself with it.
void dropCopy(Operation *copy) {
  copy->getResult(0).replaceAllUsesWith(copy->getOperand(0));
  copy->erase();
}

/// Whether `op` passes its one fp32 operand on unchanged in type (tp.f over
/// dp: identity forward, the gradient's dp sum backward) to readers that
/// only copy it to bf16: it can pass the bf16 parameter on instead.
bool passesOnToCopies(Operation *op, RankedTensorType fp32) {
  auto precision = dyn_cast<PrecisionOpInterface>(op);
  if (!precision || op->getNumOperands() != 1 || op->getNumResults() != 1 ||
      op->getResult(0).getType() != fp32)
    return false;
  PrecisionRule rule = precision.getPrecisionRule();
  return rule.results.size() == 1 && rule.results[0] == Precision::Follow &&
         onlyCopiedToBF16(op->getResult(0));
}

/// Makes the fp32 parameter argument `param` bf16: its bf16 copies become
/// the argument itself (also behind an op that only passes it on), and any
/// other reader gets one fp32 widening.
void storeInBF16(BlockArgument param) {
  auto fp32 = cast<RankedTensorType>(param.getType());
  param.setType(inBF16(fp32));
  Value widened;
  for (OpOperand &use : llvm::make_early_inc_range(param.getUses())) {
    Operation *owner = use.getOwner();
    if (isa<ConvertOp>(owner) &&
        owner->getResult(0).getType() == param.getType()) {
      dropCopy(owner);
      continue;
    }
    if (passesOnToCopies(owner, fp32)) {
      owner->getResult(0).setType(param.getType());
      for (Operation *copy :
           llvm::make_early_inc_range(owner->getResult(0).getUsers()))
        dropCopy(copy);
      continue;
    }
    if (auto write = dyn_cast<bufferization::MaterializeInDestinationOp>(owner);
        write && write.getDest() == param)
      continue; // the write-back, which the caller makes bf16
    if (!widened) {
      OpBuilder b = OpBuilder::atBlockBegin(param.getOwner());
      widened = ConvertOp::create(
          b, megatron::inLayerOf(param, param.getLoc()), fp32, param);
    }
    use.set(widened);
  }
}

void updateSignature(func::FuncOp function) {
  auto ret = cast<func::ReturnOp>(function.front().getTerminator());
  function.setType(FunctionType::get(function.getContext(),
                                     function.front().getArgumentTypes(),
                                     ret.getOperandTypes()));
}

class MasterSharder {
public:
  explicit MasterSharder(func::FuncOp function)
      : function(function), b(function.getContext()) {}

  /// Shards the masters of every parameter ZeRO-1 updates by rows; returns
  /// their names.
  llvm::StringSet<> run() {
    llvm::StringSet<> names;
    SmallVector<RowUpdate> updates;
    for (BlockArgument arg : function.getArguments())
      if (isParameter(function, arg.getArgNumber()))
        if (std::optional<RowUpdate> update = findRowUpdate(arg))
          updates.push_back(*update);
    if (updates.empty())
      return names;
    SmallVector<BlockArgument> masters = addMasters(updates);
    SmallVector<std::pair<Value, BlockArgument>> writes;
    for (auto [update, master] : llvm::zip_equal(updates, masters)) {
      names.insert(nameOf(update.param));
      writes.push_back({updateFromMaster(update, master), master});
      storeInBF16(update.param);
    }
    returnWrites(writes);
    return names;
  }

private:
  StringRef nameOf(BlockArgument arg) {
    return function
        .getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                      TPDialect::kNameAttrName)
        .getValue();
  }

  /// One master argument per update, the rows' type and the AdamW state's
  /// layout, added at once: one at a time, each insertion would copy every
  /// argument's attributes (quadratic in parameters).
  SmallVector<BlockArgument> addMasters(ArrayRef<RowUpdate> updates) {
    MLIRContext *context = function.getContext();
    SmallVector<unsigned> at(updates.size(), function.getNumArguments());
    SmallVector<Type> types;
    SmallVector<DictionaryAttr> attrs;
    SmallVector<Location> locs;
    for (const RowUpdate &update : updates) {
      unsigned index = update.param.getArgNumber();
      StringRef name = nameOf(update.param);
      NamedAttrList list(
          getArgumentKindAttrs(context, ArgumentRole::Master, name));
      list.set(TPDialect::kNameAttrName,
               b.getStringAttr((name + MGT_MASTER_SUFFIX).str()));
      for (StringRef attr : {TPDialect::kGlobalShapeAttrName,
                             TPDialect::kUnpaddedShapeAttrName,
                             TPDialect::kLayerAttrName})
        if (Attribute value = function.getArgAttr(index, attr))
          list.set(attr, value);
      // The moments' layout: the parameter's rows over dp.
      if (ShardingAttr rows = getSharding(update.adamw.getExpAvg()))
        list.set(TPDialect::kShardingAttrName, rows);
      types.push_back(update.rows.getType());
      attrs.push_back(list.getDictionary(context));
      locs.push_back(update.param.getLoc());
    }
    unsigned first = function.getNumArguments();
    (void)function.insertArguments(at, types, attrs, locs);
    return llvm::to_vector(function.getArguments().drop_front(first));
  }

  /// AdamW reads and updates `master`, in place as it does the moments;
  /// the bf16 rounding of the new rows is what the all-gather writes into
  /// the parameter. Returns the new rows, which update the master.
  Value updateFromMaster(const RowUpdate &update, BlockArgument master) {
    update.rows.getResult().replaceAllUsesWith(master);
    update.rows.erase();
    Value rows = update.adamw.getNewParam();
    b.setInsertionPoint(update.gather);
    auto rounded = ConvertOp::create(b, update.adamw.getLoc(),
                                     inBF16(rows.getType()), rows);
    rounded->setDiscardableAttrs(update.adamw->getDiscardableAttrDictionary());
    update.gather.getInputMutable().assign(rounded);
    update.gather.getResult().setType(inBF16(update.gather.getType()));
    for (Operation *write : update.gather->getUsers())
      if (isa<bufferization::MaterializeInDestinationOp>(write))
        write->getResult(0).setType(update.gather.getType());
    return rows;
  }

  /// Returns each value as one more result marked tp.updates of its
  /// argument, all at once.
  void returnWrites(ArrayRef<std::pair<Value, BlockArgument>> writes) {
    auto ret = cast<func::ReturnOp>(function.front().getTerminator());
    SmallVector<Value> results(ret.getOperands());
    SmallVector<DictionaryAttr> attrs;
    function.getAllResultAttrs(attrs);
    attrs.resize(results.size(), b.getDictionaryAttr({}));
    for (auto [value, master] : writes) {
      results.push_back(value);
      attrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(TPDialect::kUpdatesAttrName,
                         b.getI64IntegerAttr(master.getArgNumber()))));
    }
    ret->setOperands(results);
    updateSignature(function);
    function.setAllResultAttrs(attrs);
  }

  func::FuncOp function;
  OpBuilder b;
};

/// The parameters named in `names` of another entry (the kept forward
/// step), in bf16 as the training step stores them.
void storeNamedInBF16(func::FuncOp function, const llvm::StringSet<> &names) {
  for (BlockArgument arg : function.getArguments()) {
    auto name = function.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      TPDialect::kNameAttrName);
    if (name && names.contains(name.getValue()) &&
        isParameter(function, arg.getArgNumber()))
      storeInBF16(arg);
  }
}

struct ShardMasterWeightsPass
    : public megatron::impl::ShardMasterWeightsBase<ShardMasterWeightsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(tp::verifyProgramDialects(module, getArgument())))
      return signalPassFailure();
    llvm::StringSet<> sharded;
    SmallVector<func::FuncOp> others;
    for (auto function : module.getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      if (isForwardEntry(function)) {
        others.push_back(function);
        continue;
      }
      for (const auto &name : MasterSharder(function).run())
        sharded.insert(name.getKey());
      updateSignature(function);
    }
    for (func::FuncOp function : others) {
      storeNamedInBF16(function, sharded);
      updateSignature(function);
    }
  }
};

} // namespace
