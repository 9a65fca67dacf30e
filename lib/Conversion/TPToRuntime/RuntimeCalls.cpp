//===- RuntimeCalls.cpp - building blocks of the runtime lowering ---------===//
#include "RuntimeCalls.h"

#include "megatron_rt/contract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::megatron::runtime;

bool RuntimeTargetInfo::storesElementType(Type element) const {
  return element.isF32() || element.isBF16();
}

int64_t runtime::numElements(Value value) {
  return cast<ShapedType>(value.getType()).getNumElements();
}

std::string runtime::kernel(StringRef base, Value storage) {
  bool bf16 = getElementTypeOrSelf(storage.getType()).isBF16();
  return (base + (bf16 ? "_bf16" : "_f32")).str();
}

FailureOr<std::string> runtime::gemmKernel(Operation *op, Value operand,
                                           Value result) {
  Type in = getElementTypeOrSelf(operand.getType());
  Type out = getElementTypeOrSelf(result.getType());
  if (in == out)
    return kernel("mrt_gemm", operand);
  if (in.isBF16() && out.isF32())
    return std::string("mrt_gemm_bf16_f32");
  return op->emitOpError("has no runtime GEMM from ")
         << in << " operands to a " << out << " result";
}

FailureOr<int64_t> runtime::runtimeAxis(Operation *op, StringRef axis) {
  if (axis == MGT_AXIS_NAME_TP)
    return MRT_AXIS_TP;
  if (axis == MGT_AXIS_NAME_DP)
    return MRT_AXIS_DP;
  // A sub-axis of tp: the runtime knows its groups by stride and size.
  auto meshRef = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
  auto mesh =
      meshRef ? SymbolTable::lookupNearestSymbolFrom<tp::MeshOp>(op, meshRef)
              : tp::MeshOp();
  if (std::optional<tp::MeshOp::SubAxis> sub =
          mesh ? mesh.getSubAxis(axis) : std::nullopt;
      sub && sub->parent == MGT_AXIS_NAME_TP)
    return MRT_AXIS_TP_SUB(sub->stride, sub->size);
  return op->emitOpError("mesh axis \"")
         << axis
         << "\" has no runtime communicator (only \"dp\", \"tp\" and "
            "sub-axes of \"tp\")";
}

NormRows runtime::normRows(Value input) {
  int64_t cols = cast<ShapedType>(input.getType()).getShape().back();
  int64_t rows = numElements(input) / cols;
  return {rows, cols,
          RankedTensorType::get({rows}, Float32Type::get(input.getContext()))};
}

Value CallBuilder::context(Operation *op) {
  return op->getParentOfType<func::FuncOp>().getArgument(0);
}

void CallBuilder::call(StringRef name, ValueRange args, TypeRange results,
                       SmallVectorImpl<Value> *out) {
  auto module = b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  auto type = b.getFunctionType(TypeRange(args), results);
  auto callee = module.lookupSymbol<func::FuncOp>(name);
  if (!callee) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    callee = func::FuncOp::create(b, loc, name, type);
    callee.setPrivate();
  }
  auto op = func::CallOp::create(b, loc, callee, args);
  if (out)
    out->append(op.getResults().begin(), op.getResults().end());
}

Value CallBuilder::i64(int64_t value) {
  return arith::ConstantIntOp::create(b, loc, value, 64);
}

Value CallBuilder::i32(int64_t value) {
  return arith::ConstantIntOp::create(b, loc, value, 32);
}

Value CallBuilder::f32(float value) {
  return arith::ConstantFloatOp::create(b, loc, b.getF32Type(),
                                        APFloat(value));
}

Value CallBuilder::f64(double value) {
  return arith::ConstantFloatOp::create(b, loc, b.getF64Type(),
                                        APFloat(value));
}

Value CallBuilder::scalar(Value tensor, int64_t index) {
  Value position = arith::ConstantIndexOp::create(b, loc, index);
  return tensor::ExtractOp::create(b, loc, tensor, position);
}

Value CallBuilder::flat(Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  // A 0-d buffer (a scalar a collective sums) is one element long.
  if (type.getRank() == 0)
    buffer = memref::ExpandShapeOp::create(
        b, loc,
        *memref::ExpandShapeOp::computeExpandedType(type, {1}, {}), buffer,
        ArrayRef<ReassociationIndices>{});
  else if (type.getRank() != 1) {
    SmallVector<ReassociationIndices> all(1);
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      all[0].push_back(dim);
    buffer = memref::CollapseShapeOp::create(b, loc, buffer, all);
  }
  // Any offset: FinalizeRuntimeCalls passes the address of the first
  // element.
  return memref::CastOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic}, type.getElementType(),
                      StridedLayoutAttr::get(b.getContext(),
                                             ShapedType::kDynamic, {1})),
      buffer);
}

MemRefType CallBuilder::contiguousAnywhere(RankedTensorType type) {
  SmallVector<int64_t> strides(type.getRank(), 1);
  for (int64_t dim = type.getRank() - 2; dim >= 0; --dim)
    strides[dim] = strides[dim + 1] * type.getDimSize(dim + 1);
  return MemRefType::get(
      type.getShape(), type.getElementType(),
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides));
}

Value CallBuilder::input(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  Value buffer = bufferization::ToBufferOp::create(
      b, loc, contiguousAnywhere(type), value, /*read_only=*/true);
  return flat(buffer);
}

Value CallBuilder::shifted(Value view, int64_t elements) {
  Value size = memref::DimOp::create(b, loc, view, 0);
  Value rest = arith::SubIOp::create(
      b, loc, size, arith::ConstantIndexOp::create(b, loc, elements));
  // A static unit stride keeps the flat view's type.
  return memref::SubViewOp::create(
      b, loc, view, ArrayRef<OpFoldResult>{b.getIndexAttr(elements)},
      ArrayRef<OpFoldResult>{rest},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
}

CallBuilder::Output CallBuilder::output(Type type) {
  auto tensor = cast<ShapedType>(type);
  Value buffer = memref::AllocOp::create(
      b, loc, MemRefType::get(tensor.getShape(), tensor.getElementType()));
  return {buffer, flat(buffer)};
}

Value CallBuilder::tensor(const Output &out) {
  auto type = cast<MemRefType>(out.buffer.getType());
  return bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get(type.getShape(), type.getElementType()),
      out.buffer, /*restrict=*/true, /*writable=*/true);
}

CallBuilder::Output CallBuilder::inPlace(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  Value buffer = bufferization::ToBufferOp::create(
      b, loc, contiguousAnywhere(type), value);
  return {buffer, flat(buffer)};
}

Value CallBuilder::gather(RankedTensorType result, Value source, Value perRow,
                          GatherIndices where) {
  int64_t rank = result.getRank();
  SmallVector<AffineMap> maps = {
      AffineMap::get(rank, 0, b.getAffineDimExpr(0)),
      b.getMultiDimIdentityMap(rank)};
  Value init = tensor::EmptyOp::create(b, loc, result.getShape(),
                                       result.getElementType());
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, result, perRow, init, maps, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        SmallVector<Value> indices;
        for (int64_t dim = 0; dim < rank; ++dim)
          indices.push_back(linalg::IndexOp::create(nested, nestedLoc, dim));
        Value row = arith::IndexCastOp::create(
            nested, nestedLoc, nested.getIndexType(), args.front());
        Value element = tensor::ExtractOp::create(
            nested, nestedLoc, source, where(nested, nestedLoc, indices, row));
        linalg::YieldOp::create(nested, nestedLoc, element);
      });
  return generic.getResult(0);
}

Value CallBuilder::offsetI64(Value offset) {
  if (!offset)
    return i64(0);
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), offset);
}

std::pair<Value, Value> CallBuilder::dropoutKey(Value hyperparameters) {
  auto slot = [&](int64_t index) -> Value {
    return arith::FPToUIOp::create(b, loc, b.getI64Type(),
                                   scalar(hyperparameters, index));
  };
  return {slot(MGT_HP_DROPOUT_SEED), slot(MGT_HP_STEP)};
}

Value CallBuilder::elementwise(RankedTensorType result, ValueRange inputs,
                               ScalarBody body, Value into) {
  int64_t rank = result.getRank();
  SmallVector<AffineMap> maps;
  for (Value value : inputs) {
    int64_t inputRank = cast<RankedTensorType>(value.getType()).getRank();
    SmallVector<AffineExpr> dims;
    for (int64_t dim = rank - inputRank; dim < rank; ++dim)
      dims.push_back(b.getAffineDimExpr(dim));
    maps.push_back(AffineMap::get(rank, 0, dims, b.getContext()));
  }
  maps.push_back(b.getMultiDimIdentityMap(rank));
  Value init = into ? into
                    : tensor::EmptyOp::create(b, loc, result.getShape(),
                                              result.getElementType());
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, result, inputs, init, maps, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        Type f32 = nested.getF32Type();
        SmallVector<Value> wide;
        // An accumulator's element comes first, as if it were an input.
        SmallVector<Value> terms;
        if (into)
          terms.push_back(args.back());
        llvm::append_range(terms, args.drop_back());
        for (Value arg : terms)
          wide.push_back(cast<FloatType>(arg.getType()).getWidth() < 32
                             ? arith::ExtFOp::create(nested, nestedLoc, f32,
                                                     arg)
                             : arg);
        Value value = body(nested, nestedLoc, wide);
        Type element = result.getElementType();
        if (cast<FloatType>(element).getWidth() <
            cast<FloatType>(value.getType()).getWidth())
          value = arith::TruncFOp::create(nested, nestedLoc, element, value);
        else if (element != value.getType())
          value = arith::ExtFOp::create(nested, nestedLoc, element, value);
        linalg::YieldOp::create(nested, nestedLoc, value);
      });
  return generic.getResult(0);
}

/// The map of a reduction along `dim` that keeps it with size 1.
static AffineMap keptDimensionMap(OpBuilder &b, int64_t rank, int64_t dim) {
  SmallVector<AffineExpr> dims;
  for (int64_t d = 0; d < rank; ++d)
    dims.push_back(d == dim ? b.getAffineConstantExpr(0)
                            : b.getAffineDimExpr(d));
  return AffineMap::get(rank, 0, dims, b.getContext());
}

Value CallBuilder::reduceAlong(Value input, int64_t dim, double init,
                               Combine combine) {
  auto type = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = 1;
  auto resultType = type.clone(shape);
  Value empty = tensor::EmptyOp::create(b, loc, shape, type.getElementType());
  Value initValue = arith::ConstantOp::create(
      b, loc, b.getFloatAttr(type.getElementType(), init));
  Value start = linalg::FillOp::create(b, loc, initValue, empty).getResult(0);
  int64_t rank = type.getRank();
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(rank),
                                 keptDimensionMap(b, rank, dim)};
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  iterators[dim] = utils::IteratorType::reduction;
  return linalg::GenericOp::create(
             b, loc, resultType, input, start, maps, iterators,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               linalg::YieldOp::create(nb, nl,
                                       combine(nb, nl, args[1], args[0]));
             })
      .getResult(0);
}

Value CallBuilder::withRow(Value a, Value row, int64_t dim, Combine body) {
  auto type = cast<RankedTensorType>(a.getType());
  int64_t rank = type.getRank();
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(rank),
                                 keptDimensionMap(b, rank, dim),
                                 b.getMultiDimIdentityMap(rank)};
  Value init = tensor::EmptyOp::create(b, loc, type.getShape(),
                                       type.getElementType());
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, type, ValueRange{a, row}, init, maps, iterators,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               linalg::YieldOp::create(nb, nl, body(nb, nl, args[0], args[1]));
             })
      .getResult(0);
}
