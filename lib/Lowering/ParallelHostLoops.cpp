//===- ParallelHostLoops.cpp - the step's loops on the runtime's threads --===//
//
// On the CPU target the runtime's kernels and GEMMs run on every OpenMP
// thread, but the loops the compiler generates (AdamW's update, the tied
// embedding's gradient sum, the elementwise chains between kernels) ran on
// one: at GPT-2 124M with two threads a tenth of the step, while the other
// thread waited. Each large scf.parallel becomes a function over a range of
// its first dimension, called by the runtime's mrt_parallel_for on those
// same threads.
//
// The function takes the values the loop reads from its parent through one
// pointer, to a struct the caller fills: a buffer as its LLVM descriptor
// (the struct finalize-memref-to-llvm makes of it; the casts to and from it
// fold away there), an index as i64, other scalars as they are.
//
//===----------------------------------------------------------------------===//
#include "megatron/Lowering/Passes.h"

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"

namespace mlir::megatron {
#define GEN_PASS_DEF_PARALLELHOSTLOOPS
#include "megatron/Lowering/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;

namespace {

constexpr StringLiteral kParallelFor = "mrt_parallel_for";

/// The iterations of `loop`, all its dimensions together, when its bounds
/// and steps are constants.
std::optional<int64_t> staticTripCount(LoopLikeOpInterface loop) {
  std::optional<SmallVector<OpFoldResult>> lowers = loop.getLoopLowerBounds();
  std::optional<SmallVector<OpFoldResult>> uppers = loop.getLoopUpperBounds();
  std::optional<SmallVector<OpFoldResult>> steps = loop.getLoopSteps();
  if (!lowers || !uppers || !steps)
    return std::nullopt;
  int64_t trips = 1;
  for (auto [lower, upper, step] : llvm::zip(*lowers, *uppers, *steps)) {
    std::optional<int64_t> lo = getConstantIntValue(lower);
    std::optional<int64_t> hi = getConstantIntValue(upper);
    std::optional<int64_t> by = getConstantIntValue(step);
    if (!lo || !hi || !by || *by <= 0)
      return std::nullopt;
    trips *= llvm::divideCeil(std::max<int64_t>(*hi - *lo, 0), *by);
  }
  return trips;
}

/// Ops `body` runs, counted as its loops run them (a nested loop's body
/// times its trip count); nothing when a nested trip count is not static.
std::optional<int64_t> opsRun(Block &body) {
  int64_t total = 0;
  for (Operation &op : body) {
    auto loop = dyn_cast<LoopLikeOpInterface>(op);
    if (!loop) {
      total += 1;
      continue;
    }
    std::optional<int64_t> trips = staticTripCount(loop);
    std::optional<int64_t> inner = opsRun(op.getRegion(0).front());
    if (!trips || !inner)
      return std::nullopt;
    total += *trips * *inner;
  }
  return total;
}

/// The static trip count of `loop`'s first dimension.
std::optional<int64_t> outerTripCount(scf::ParallelOp loop) {
  std::optional<int64_t> lower = getConstantIntValue(loop.getLowerBound()[0]);
  std::optional<int64_t> upper = getConstantIntValue(loop.getUpperBound()[0]);
  std::optional<int64_t> step = getConstantIntValue(loop.getStep()[0]);
  if (!lower || !upper || !step || *step <= 0)
    return std::nullopt;
  return llvm::divideCeil(std::max<int64_t>(*upper - *lower, 0), *step);
}

/// How a value the loop reads crosses into its function: its field's type
/// in the captures struct, or nothing for a type that cannot.
Type fieldType(Value value, const LLVMTypeConverter &converter) {
  Type type = value.getType();
  if (auto memref = dyn_cast<MemRefType>(type))
    return converter.convertType(memref);
  if (type.isIndex())
    return IntegerType::get(type.getContext(), 64);
  if (type.isIntOrFloat() || isa<LLVM::LLVMPointerType>(type))
    return type;
  return {};
}

/// `value` as it is stored in its field, and back.
Value toField(OpBuilder &b, Location loc, Value value, Type field) {
  if (isa<MemRefType>(value.getType()))
    return UnrealizedConversionCastOp::create(b, loc, field, value)
        .getResult(0);
  if (value.getType().isIndex())
    return arith::IndexCastOp::create(b, loc, field, value);
  return value;
}
Value fromField(OpBuilder &b, Location loc, Value field, Type type) {
  if (isa<MemRefType>(type))
    return UnrealizedConversionCastOp::create(b, loc, type, field).getResult(0);
  if (type.isIndex())
    return arith::IndexCastOp::create(b, loc, type, field);
  return field;
}

/// Every value `loop` reads from its parent: from its region, and its
/// bounds and steps.
llvm::SetVector<Value> valuesFromAbove(scf::ParallelOp loop) {
  llvm::SetVector<Value> values;
  getUsedValuesDefinedAbove(loop.getRegion(), values);
  values.insert(loop->getOperands().begin(), loop->getOperands().end());
  return values;
}

/// Those of them the loop's function takes through its captures: constants
/// are cloned into it instead.
llvm::SetVector<Value> capturedValues(scf::ParallelOp loop) {
  llvm::SetVector<Value> captured;
  for (Value value : valuesFromAbove(loop))
    if (!matchPattern(value, m_Constant()))
      captured.insert(value);
  return captured;
}

class LoopOutliner {
public:
  LoopOutliner(ModuleOp module, int64_t minOps)
      : module(module), symbols(module), converter(module.getContext()),
        minOps(minOps) {}

  /// Runs `loop` through mrt_parallel_for when it does enough work for the
  /// threads to pay off and everything it reads can cross.
  void parallelize(scf::ParallelOp loop) {
    std::optional<int64_t> trips = outerTripCount(loop);
    std::optional<int64_t> total = staticTripCount(loop);
    std::optional<int64_t> ops = opsRun(*loop.getBody());
    if (loop.getNumResults() != 0 || !trips || *trips < 2 || !total || !ops ||
        *total * *ops < minOps)
      return;

    llvm::SetVector<Value> captured = capturedValues(loop);
    SmallVector<Type> fields;
    for (Value value : captured) {
      Type field = fieldType(value, converter);
      if (!field)
        return;
      fields.push_back(field);
    }
    auto layout = LLVM::LLVMStructType::getLiteral(module.getContext(), fields);
    func::FuncOp body = outline(loop, captured, layout);
    callParallelFor(loop, body, captured, layout, *trips);
    loop->erase();
  }

private:
  /// `@<parent>_parallel_loop<n>(captures, begin, end)`: the loop over
  /// iterations [begin, end) of its first dimension.
  func::FuncOp outline(scf::ParallelOp loop,
                       const llvm::SetVector<Value> &captured,
                       LLVM::LLVMStructType layout) {
    MLIRContext *ctx = module.getContext();
    Location loc = loop.getLoc();
    auto parent = loop->getParentOfType<func::FuncOp>();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    Type i64 = IntegerType::get(ctx, 64);
    OpBuilder b(parent);
    auto fn = func::FuncOp::create(
        b, loc, (parent.getSymName() + "_parallel_loop").str(),
        b.getFunctionType({ptr, i64, i64}, {}));
    fn.setPrivate();
    symbols.insert(fn);

    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value fieldsPtr = entry->getArgument(0);
    IRMapping mapping;
    for (auto [k, value] : llvm::enumerate(captured)) {
      Type field = layout.getBody()[k];
      Value address = LLVM::GEPOp::create(
          b, loc, ptr, layout, fieldsPtr,
          ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(k)});
      Value loaded = LLVM::LoadOp::create(b, loc, field, address);
      mapping.map(value, fromField(b, loc, loaded, value.getType()));
    }
    for (Value value : valuesFromAbove(loop))
      if (!mapping.contains(value))
        mapping.map(value, b.clone(*value.getDefiningOp())->getResult(0));

    auto part = cast<scf::ParallelOp>(b.clone(*loop, mapping));
    Value lower = part.getLowerBound()[0];
    Value step = part.getStep()[0];
    auto bound = [&](Value iteration) {
      Value index = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                               iteration);
      return arith::AddIOp::create(
          b, loc, lower, arith::MulIOp::create(b, loc, index, step));
    };
    b.setInsertionPoint(part);
    Value begin = bound(entry->getArgument(1));
    Value end = bound(entry->getArgument(2));
    part.getLowerBoundMutable()[0].set(begin);
    part.getUpperBoundMutable()[0].set(end);
    b.setInsertionPointToEnd(entry);
    func::ReturnOp::create(b, loc);
    return fn;
  }

  /// Fills the captures struct (allocated once, at the top of the parent)
  /// and calls mrt_parallel_for(body, captures, trips) where `loop` was.
  void callParallelFor(scf::ParallelOp loop, func::FuncOp body,
                       const llvm::SetVector<Value> &captured,
                       LLVM::LLVMStructType layout, int64_t trips) {
    MLIRContext *ctx = module.getContext();
    Location loc = loop.getLoc();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    Type i64 = IntegerType::get(ctx, 64);
    auto parent = loop->getParentOfType<func::FuncOp>();
    OpBuilder b(ctx);
    b.setInsertionPointToStart(&parent.getBody().front());
    Value one = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(1));
    Value fieldsPtr = LLVM::AllocaOp::create(b, loc, ptr, layout, one);

    b.setInsertionPoint(loop);
    for (auto [k, value] : llvm::enumerate(captured)) {
      Value address = LLVM::GEPOp::create(
          b, loc, ptr, layout, fieldsPtr,
          ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(k)});
      LLVM::StoreOp::create(b, loc, toField(b, loc, value, layout.getBody()[k]),
                            address);
    }
    Value fn = func::ConstantOp::create(b, loc, body.getFunctionType(),
                                        SymbolRefAttr::get(body));
    Value count = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(trips));
    func::CallOp::create(b, loc, parallelFor(body.getFunctionType()),
                         ValueRange{fn, fieldsPtr, count});
  }

  /// mrt_parallel_for's declaration (megatron_rt/parallel.h).
  func::FuncOp parallelFor(FunctionType bodyType) {
    if (auto existing = symbols.lookup<func::FuncOp>(kParallelFor))
      return existing;
    MLIRContext *ctx = module.getContext();
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto decl = func::FuncOp::create(
        b, module.getLoc(), kParallelFor,
        b.getFunctionType({bodyType, LLVM::LLVMPointerType::get(ctx),
                           IntegerType::get(ctx, 64)},
                          {}));
    decl.setPrivate();
    symbols.insert(decl);
    return decl;
  }

  ModuleOp module;
  SymbolTable symbols;
  LLVMTypeConverter converter;
  int64_t minOps;
};

struct ParallelHostLoopsPass
    : public megatron::impl::ParallelHostLoopsBase<ParallelHostLoopsPass> {
  using ParallelHostLoopsBase::ParallelHostLoopsBase;

  void runOnOperation() override {
    SmallVector<scf::ParallelOp> outermost;
    getOperation().walk([&](scf::ParallelOp loop) {
      if (!loop->getParentOfType<scf::ParallelOp>())
        outermost.push_back(loop);
    });
    LoopOutliner outliner(getOperation(), minOps);
    for (scf::ParallelOp loop : outermost)
      outliner.parallelize(loop);
  }
};

} // namespace
