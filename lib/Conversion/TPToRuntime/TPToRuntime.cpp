//===- TPToRuntime.cpp - per-rank tp ops to runtime calls and linalg ------===//
//
// The per-rank program after tp-partition is lowered op by op, in program
// order. Ops with a hand-written kernel (GEMM, attention, layer norm,
// embedding, the cross-entropy pieces, collectives) become calls into
// libmegatron_rt. Calls take flat `memref<?xT>` buffers, which the bare-pointer
// calling convention turns into the plain C pointers the runtime's ABI uses.
// Elementwise ops become linalg.generic on tensors so that elementwise fusion
// can merge bias, GELU and residual chains before bufferization.
//
//===----------------------------------------------------------------------===//
#include "megatron/Conversion/Passes.h"
#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

namespace mlir::megatron {
#define GEN_PASS_DEF_CONVERTTPTORUNTIME
#include "megatron/Conversion/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

int64_t numElements(Value value) {
  return cast<ShapedType>(value.getType()).getNumElements();
}

/// Emits the calls of one function; `ctx` is the rank's runtime context.
class RuntimeLowering {
public:
  RuntimeLowering(ModuleOp module, Value ctx)
      : module(module), ctx(ctx), b(module.getContext()) {}

  LogicalResult lower(Operation *op);

  void fuseResidualLayerNorms(func::FuncOp function);
  LogicalResult fuseGemmEpilogues(func::FuncOp function);

private:
  //===--------------------------------------------------------------------===//
  // Building blocks
  //===--------------------------------------------------------------------===//

  /// Declares (once) `name` as an external function with these types.
  void call(Location loc, StringRef name, ValueRange args,
            TypeRange results = {}, SmallVectorImpl<Value> *out = nullptr) {
    auto type = b.getFunctionType(TypeRange(ValueRange(args)), results);
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

  Value i64(Location loc, int64_t value) {
    return arith::ConstantIntOp::create(b, loc, value, 64);
  }
  Value i32(Location loc, int64_t value) {
    return arith::ConstantIntOp::create(b, loc, value, 32);
  }
  Value f32(Location loc, float value) {
    return arith::ConstantFloatOp::create(b, loc, b.getF32Type(),
                                          APFloat(value));
  }

  Value scalar(Location loc, Value tensor, int64_t index) {
    Value position = arith::ConstantIndexOp::create(b, loc, index);
    return tensor::ExtractOp::create(b, loc, tensor, position);
  }

  /// A flat `memref<?xT>` view of a contiguous static buffer.
  Value flat(Location loc, Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    if (type.getRank() != 1) {
      SmallVector<ReassociationIndices> all(1);
      for (int64_t dim = 0; dim < type.getRank(); ++dim)
        all[0].push_back(dim);
      buffer = memref::CollapseShapeOp::create(b, loc, buffer, all);
    }
    return memref::CastOp::create(
        b, loc,
        MemRefType::get({ShapedType::kDynamic}, type.getElementType()),
        buffer);
  }

  /// The buffer behind tensor `value`, read-only, as a flat view.
  Value input(Location loc, Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    Value buffer = bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(type.getShape(), type.getElementType()), value,
        /*read_only=*/true);
    return flat(loc, buffer);
  }

  /// A fresh buffer a kernel writes; `tensor()` hands it back to the tensor
  /// program once written.
  struct Output {
    Value buffer, view;
  };
  Output output(Location loc, Type type) {
    auto tensor = cast<ShapedType>(type);
    Value buffer = memref::AllocOp::create(
        b, loc, MemRefType::get(tensor.getShape(), tensor.getElementType()));
    return {buffer, flat(loc, buffer)};
  }
  Value tensor(Location loc, const Output &out) {
    auto type = cast<MemRefType>(out.buffer.getType());
    return bufferization::ToTensorOp::create(
        b, loc, RankedTensorType::get(type.getShape(), type.getElementType()),
        out.buffer, /*restrict=*/true, /*writable=*/true);
  }

  FailureOr<int64_t> runtimeAxis(Operation *op, StringRef axis) {
    if (axis == MGT_AXIS_NAME_TP)
      return MRT_AXIS_TP;
    if (axis == MGT_AXIS_NAME_DP)
      return MRT_AXIS_DP;
    return op->emitOpError("mesh axis \"")
           << axis << "\" has no runtime communicator (only \"dp\" and \"tp\")";
  }

  /// The runtime's variant of kernel `base` for `storage`'s element type
  /// (checkElementTypes admitted only these two).
  static std::string kernel(StringRef base, Value storage) {
    bool bf16 = getElementTypeOrSelf(storage.getType()).isBF16();
    return (base + (bf16 ? "_bf16" : "_f32")).str();
  }

  /// A GEMM's runtime entry point: bf16 operands may write fp32 (the
  /// parameter gradients).
  FailureOr<std::string> gemmKernel(Operation *op, Value operand,
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

  /// An elementwise linalg.generic over `result`'s shape; `inputs` are
  /// indexed by the trailing dimensions they have. `body` computes in fp32
  /// whatever the storage: bf16 operands are widened, the result rounded.
  Value elementwise(Location loc, RankedTensorType result, ValueRange inputs,
                    function_ref<Value(OpBuilder &, Location, ValueRange)>
                        body) {
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
    Value init = tensor::EmptyOp::create(b, loc, result.getShape(),
                                         result.getElementType());
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        b, loc, result, inputs, init, maps, iterators,
        [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
          Type f32 = nested.getF32Type();
          SmallVector<Value> wide;
          for (Value arg : args.drop_back())
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

  //===--------------------------------------------------------------------===//
  // Ops
  //===--------------------------------------------------------------------===//

  static LogicalResult checkGemm(MatmulOp op) {
    if (op.getRhs().getType().getRank() != 2)
      return op.emitOpError(
          "with a batched rhs has no runtime lowering; only [K, N] weights");
    if (op.getTransposeLhs() && op.getLhs().getType().getRank() != 2)
      return op.emitOpError(
          "with transpose_lhs and batch dimensions has no runtime lowering");
    return success();
  }

  /// What a GEMM's epilogue computes after the product: the [N] `bias`
  /// add, then `gelu` of the sum; `sum` is the value the call replaces.
  struct GemmEpilogue {
    Value sum;
    Value bias;
    GeluOp gelu;
  };

  /// One runtime GEMM for `op` with its epilogue; batch dimensions fold
  /// into the rows of the GEMM against the weight.
  LogicalResult lowerGemm(MatmulOp op, GemmEpilogue epilogue) {
    if (failed(checkGemm(op)))
      return failure();
    Location loc = op.getLoc();
    auto lhs = op.getLhs().getType();
    int64_t k = op.getTransposeLhs() ? lhs.getDimSize(0) : lhs.getShape().back();
    int64_t m = numElements(op.getLhs()) / k;
    int64_t n = op.getType().getShape().back();
    Value a = input(loc, op.getLhs()), w = input(loc, op.getRhs());
    Output c = output(loc, op.getType());
    SmallVector<Value> args = {i32(loc, op.getTransposeLhs()),
                               i32(loc, op.getTransposeRhs()), i64(loc, m),
                               i64(loc, n), i64(loc, k)};
    Value lda = i64(loc, op.getTransposeLhs() ? m : k),
          ldb = i64(loc, op.getTransposeRhs() ? k : n);
    if (!epilogue.bias) {
      // The verifier gives lhs and result one element type.
      args.append({f32(loc, 1.0f), a, lda, w, ldb, f32(loc, 0.0f), c.view,
                   i64(loc, n)});
      call(loc, kernel("mrt_gemm", op.getLhs()), args);
    } else if (!epilogue.gelu) {
      args.append({a, lda, w, ldb, input(loc, epilogue.bias), c.view,
                   i64(loc, n)});
      call(loc, kernel("mrt_gemm_bias", op.getLhs()), args);
    } else {
      Output out = output(loc, epilogue.gelu.getType());
      args.append({a, lda, w, ldb, input(loc, epilogue.bias), c.view, out.view,
                   i64(loc, n)});
      call(loc, kernel("mrt_gemm_bias_gelu", op.getLhs()), args);
      epilogue.gelu.replaceAllUsesWith(tensor(loc, out));
    }
    epilogue.sum.replaceAllUsesWith(tensor(loc, c));
    return success();
  }

  LogicalResult lowerMatmul(MatmulOp op) {
    return lowerGemm(op, {op.getResult(), Value(), GeluOp()});
  }

  /// A layer norm's input as rows of its last dimension, and the type of
  /// its per-row statistics (mean, rstd).
  struct NormRows {
    int64_t rows, cols;
    RankedTensorType stats;
  };
  NormRows normRows(Value input) {
    int64_t cols = cast<ShapedType>(input.getType()).getShape().back();
    int64_t rows = numElements(input) / cols;
    return {rows, cols, RankedTensorType::get({rows}, b.getF32Type())};
  }

  LogicalResult lowerLayerNorm(LayerNormOp op) {
    Location loc = op.getLoc();
    auto [rows, cols, stats] = normRows(op.getInput());
    Value x = input(loc, op.getInput()), w = input(loc, op.getWeight()),
          bias = input(loc, op.getBias());
    Output y = output(loc, op.getType()), mean = output(loc, stats),
           rstd = output(loc, stats);
    call(loc, kernel("mrt_layernorm_fwd", op.getInput()),
         {x, w, bias, y.view, mean.view, rstd.view, i64(loc, rows),
          i64(loc, cols), f32(loc, op.getEpsilon().convertToFloat())});
    op.replaceAllUsesWith(tensor(loc, y));
    return success();
  }

  /// `value` is available at `op`: an argument, or computed before it.
  static bool definedBefore(Value value, Operation *op) {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return arg.getOwner() == op->getBlock();
    Operation *def = value.getDefiningOp();
    return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
  }

  /// x + bias_add(delta, bias) feeding a layer norm (every residual
  /// connection of GPT-2 but the embeddings'): one pass writes the sum, which
  /// the residual stream carries on, and its norm, instead of a loop writing
  /// the sum and a layer norm reading it back.
  void fuseResidualLayerNorm(AddOp add, BiasAddOp branch, LayerNormOp norm) {
    Location loc = add.getLoc();
    b.setInsertionPoint(add);
    Value residual = add.getLhs() == branch.getResult() ? add.getRhs()
                                                        : add.getLhs();
    auto [rows, cols, stats] = normRows(add.getResult());
    Value x = input(loc, residual), delta = input(loc, branch.getInput()),
          bias = input(loc, branch.getBias()), w = input(loc, norm.getWeight()),
          beta = input(loc, norm.getBias());
    Output sum = output(loc, add.getType()), y = output(loc, norm.getType()),
           mean = output(loc, stats), rstd = output(loc, stats);
    call(loc, kernel("mrt_residual_layernorm_fwd", add.getResult()),
         {x, delta, bias, sum.view, w, beta, y.view, mean.view, rstd.view,
          i64(loc, rows), i64(loc, cols),
          f32(loc, norm.getEpsilon().convertToFloat())});
    add.replaceAllUsesWith(tensor(loc, sum));
    norm.replaceAllUsesWith(tensor(loc, y));
    norm.erase();
    add.erase();
    branch.erase();
  }

  LogicalResult lowerAttention(AttentionOp op) {
    Location loc = op.getLoc();
    auto out = op.getType();
    int64_t batch = out.getDimSize(0), seq = out.getDimSize(1);
    int64_t heads = op.getNumHeads(), width = out.getDimSize(2) / heads;
    Value qkv = input(loc, op.getQkv());
    Output y = output(loc, out);
    Output lse = output(
        loc, RankedTensorType::get({batch, heads, seq}, b.getF32Type()));
    call(loc, kernel("mrt_attention_fwd", op.getQkv()),
         {qkv, y.view, lse.view, i64(loc, batch), i64(loc, seq),
          i64(loc, heads), i64(loc, width)});
    op.replaceAllUsesWith(tensor(loc, y));
    return success();
  }

  /// The first row of this rank's vocabulary slice (0 when not split).
  Value vocabStart(Location loc, Value offset) {
    if (!offset)
      return i64(loc, 0);
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), offset);
  }

  LogicalResult lowerEmbedding(EmbeddingOp op) {
    Location loc = op.getLoc();
    auto table = op.getTable().getType();
    Value start = vocabStart(loc, op.getOffset());
    Value t = input(loc, op.getTable()), ids = input(loc, op.getIds());
    Output y = output(loc, op.getType());
    call(loc, kernel("mrt_embedding_fwd", op.getTable()),
         {t, ids, start, i64(loc, table.getDimSize(0)),
          i64(loc, table.getDimSize(1)), i64(loc, numElements(op.getIds())),
          y.view});
    op.replaceAllUsesWith(tensor(loc, y));
    return success();
  }

  /// The first T rows of the position table.
  LogicalResult lowerPositionEmbedding(PositionEmbeddingOp op) {
    auto type = op.getType();
    SmallVector<OpFoldResult> offsets(2, b.getIndexAttr(0)),
        strides(2, b.getIndexAttr(1));
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(type.getDimSize(0)),
                                       b.getIndexAttr(type.getDimSize(1))};
    op.replaceAllUsesWith(tensor::ExtractSliceOp::create(
                              b, op.getLoc(), type, op.getTable(), offsets,
                              sizes, strides)
                              .getResult());
    return success();
  }

  /// x + y elementwise, y broadcast over x's leading dimensions (a bias) or
  /// of x's shape (a residual).
  LogicalResult lowerSum(Operation *op, Value x, Value y) {
    op->getResult(0).replaceAllUsesWith(elementwise(
        op->getLoc(), cast<RankedTensorType>(op->getResult(0).getType()), {x, y},
        [](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          return arith::AddFOp::create(nb, loc, args[0], args[1]);
        }));
    return success();
  }

  /// The elementwise generic widens and rounds; the body is the identity.
  LogicalResult lowerConvert(ConvertOp op) {
    op.replaceAllUsesWith(elementwise(
        op.getLoc(), op.getType(), {op.getInput()},
        [](OpBuilder &, Location, ValueRange args) { return args[0]; }));
    return success();
  }

  /// GPT-2's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  LogicalResult lowerGelu(GeluOp op) {
    op.replaceAllUsesWith(elementwise(
        op.getLoc(), op.getType(), {op.getInput()},
        [](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          Type type = args[0].getType();
          auto constant = [&](double value) -> Value {
            return arith::ConstantOp::create(nb, loc,
                                             nb.getFloatAttr(type, value));
          };
          Value x = args[0];
          Value cube = arith::MulFOp::create(
              nb, loc, x, arith::MulFOp::create(nb, loc, x, x));
          Value inner = arith::AddFOp::create(
              nb, loc, x,
              arith::MulFOp::create(nb, loc, constant(MGT_GELU_CUBIC), cube));
          Value scaled = arith::MulFOp::create(
              nb, loc, constant(MGT_GELU_SQRT_2_OVER_PI), inner);
          Value onePlus = arith::AddFOp::create(
              nb, loc, constant(1.0), math::TanhOp::create(nb, loc, scaled));
          return arith::MulFOp::create(
              nb, loc, arith::MulFOp::create(nb, loc, constant(0.5), x),
              onePlus);
        }));
    return success();
  }

  /// Unsplit cross-entropy is the vocabulary-parallel recipe on one rank:
  /// the same pieces with offset 0 and nothing to all-reduce.
  LogicalResult lowerCrossEntropy(CrossEntropyOp op) {
    Location loc = op.getLoc();
    auto logits = op.getLogits().getType();
    auto tokens = RankedTensorType::get(logits.getShape().drop_back(),
                                        op.getType().getElementType());
    Value offset = arith::ConstantIndexOp::create(b, loc, 0);
    auto max = XentMaxOp::create(b, loc, tokens, op.getLogits(), offset,
                                 op.getValidVocab());
    auto sums = XentSumExpOp::create(b, loc, op.getLogits(), max,
                                     op.getTargets(), offset,
                                     b.getI64IntegerAttr(op.getValidVocab()));
    auto loss = XentLossOp::create(b, loc, op.getType(), sums.getSumExp(), max,
                                   sums.getTargetLogit());
    op.replaceAllUsesWith(loss.getResult());
    for (Operation *piece :
         {max.getOperation(), sums.getOperation(), loss.getOperation()})
      if (failed(lower(piece)))
        return failure();
    return success();
  }

  LogicalResult lowerXentMax(XentMaxOp op) {
    Location loc = op.getLoc();
    int64_t vocab = op.getLogits().getType().getShape().back();
    Value start = vocabStart(loc, op.getOffset());
    Value logits = input(loc, op.getLogits());
    Output max = output(loc, op.getType());
    call(loc, kernel("mrt_vocab_ce_local_max", op.getLogits()),
         {logits, i64(loc, numElements(op.getMax())), i64(loc, vocab), start,
          i64(loc, op.getValidVocab()), max.view});
    op.replaceAllUsesWith(tensor(loc, max));
    return success();
  }

  LogicalResult lowerXentSumExp(XentSumExpOp op) {
    Location loc = op.getLoc();
    int64_t vocab = op.getLogits().getType().getShape().back();
    Value start = vocabStart(loc, op.getOffset());
    Value logits = input(loc, op.getLogits()),
          targets = input(loc, op.getTargets()), max = input(loc, op.getMax());
    Output sumExp = output(loc, op.getSumExp().getType()),
           target = output(loc, op.getTargetLogit().getType());
    call(loc, kernel("mrt_vocab_ce_local_sumexp", op.getLogits()),
         {logits, targets, i64(loc, numElements(op.getMax())), i64(loc, vocab),
          start, i64(loc, op.getValidVocab()), max, sumExp.view, target.view});
    op.getSumExp().replaceAllUsesWith(tensor(loc, sumExp));
    op.getTargetLogit().replaceAllUsesWith(tensor(loc, target));
    return success();
  }

  LogicalResult lowerXentLoss(XentLossOp op) {
    Location loc = op.getLoc();
    Value max = input(loc, op.getMax()), sumExp = input(loc, op.getSumExp()),
          target = input(loc, op.getTargetLogit());
    SmallVector<Value> loss;
    call(loc, "mrt_vocab_ce_loss_f32",
         {max, sumExp, target, i64(loc, numElements(op.getMax()))},
         b.getF32Type(), &loss);
    op.replaceAllUsesWith(
        tensor::FromElementsOp::create(b, loc, op.getType(), loss).getResult());
    return success();
  }

  /// Sums (or maxes) a copy of `value` across the ranks of `axis`.
  LogicalResult allReduce(Operation *op, Value value, StringRef axis,
                          int64_t reduction) {
    FailureOr<int64_t> runtime = runtimeAxis(op, axis);
    if (failed(runtime))
      return failure();
    Location loc = op->getLoc();
    auto type = cast<RankedTensorType>(value.getType());
    if (auto elements = value.getDefiningOp<tensor::FromElementsOp>();
        elements && type.getNumElements() == 1 && type.getElementType().isF32()) {
      // A host scalar (the squared gradient norm) stays one: no buffer for
      // the host to write, which a GPU target would place in device memory.
      SmallVector<Value> reduced;
      call(loc, "mrt_all_reduce_scalar_f32",
           {ctx, i32(loc, *runtime), elements.getElements()[0],
            i32(loc, reduction)},
           b.getF32Type(), &reduced);
      op->getResult(0).replaceAllUsesWith(
          tensor::FromElementsOp::create(b, loc, type, reduced).getResult());
      return success();
    }
    Value source = bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(type.getShape(), type.getElementType()), value,
        /*read_only=*/true);
    Output result = output(loc, type);
    memref::CopyOp::create(b, loc, source, result.buffer);
    call(loc, kernel("mrt_all_reduce", value),
         {ctx, i32(loc, *runtime), result.view, i64(loc, numElements(value)),
          i32(loc, reduction)});
    op->getResult(0).replaceAllUsesWith(tensor(loc, result));
    return success();
  }

  Value axisRank(Location loc, int64_t runtime) {
    SmallVector<Value> rank;
    call(loc, "mrt_axis_rank", {ctx, i32(loc, runtime)}, b.getI64Type(),
         &rank);
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), rank[0]);
  }

  LogicalResult lowerAxisIndex(AxisIndexOp op) {
    FailureOr<int64_t> runtime = runtimeAxis(op, op.getAxis());
    if (failed(runtime))
      return failure();
    op.replaceAllUsesWith(axisRank(op.getLoc(), *runtime));
    return success();
  }

  /// This rank's chunk: a slice at rank * size along `dim`.
  LogicalResult lowerLocalSlice(LocalSliceOp op) {
    FailureOr<int64_t> runtime = runtimeAxis(op, op.getAxis());
    if (failed(runtime))
      return failure();
    Location loc = op.getLoc();
    auto type = op.getType();
    int64_t dim = op.getDim();
    Value start = arith::MulIOp::create(
        b, loc, axisRank(loc, *runtime),
        arith::ConstantIndexOp::create(b, loc, type.getDimSize(dim)));
    SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0)),
        sizes, strides(type.getRank(), b.getIndexAttr(1));
    offsets[dim] = start;
    for (int64_t size : type.getShape())
      sizes.push_back(b.getIndexAttr(size));
    op.replaceAllUsesWith(tensor::ExtractSliceOp::create(
                              b, loc, type, op.getInput(), offsets, sizes,
                              strides)
                              .getResult());
    return success();
  }

  /// Only a split of the outermost non-unit dimension is a contiguous
  /// concatenation of the ranks' buffers.
  static bool isOutermost(RankedTensorType type, int64_t dim) {
    return llvm::all_of(type.getShape().take_front(dim),
                        [](int64_t size) { return size == 1; });
  }

  template <typename CollectiveOp>
  LogicalResult lowerGatherOrScatter(CollectiveOp op, StringRef runtimeName,
                                     RankedTensorType local) {
    if (!isOutermost(op.getType(), op.getDim()))
      return op.emitOpError("along dimension ")
             << op.getDim()
             << " has no runtime lowering; only the outermost dimension";
    FailureOr<int64_t> runtime = runtimeAxis(op, op.getAxis());
    if (failed(runtime))
      return failure();
    Location loc = op.getLoc();
    Value in = input(loc, op.getInput());
    Output out = output(loc, op.getType());
    call(loc, kernel(runtimeName, op.getInput()),
         {ctx, i32(loc, *runtime), in, out.view,
          i64(loc, local.getNumElements())});
    op.replaceAllUsesWith(tensor(loc, out));
    return success();
  }


  /// Reduces `input` along `dim` with `combine`, starting from `init`; the
  /// result keeps the dimension (size 1) so it broadcasts back.
  Value reduceAlong(Location loc, Value input, int64_t dim, double init,
                    function_ref<Value(OpBuilder &, Location, Value, Value)>
                        combine) {
    auto type = cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] = 1;
    auto resultType = type.clone(shape);
    Value empty = tensor::EmptyOp::create(b, loc, shape, type.getElementType());
    Value initValue = arith::ConstantOp::create(
        b, loc, b.getFloatAttr(type.getElementType(), init));
    Value start = linalg::FillOp::create(b, loc, initValue, empty).getResult(0);
    int64_t rank = type.getRank();
    SmallVector<AffineExpr> outputDims;
    for (int64_t d = 0; d < rank; ++d)
      outputDims.push_back(d == dim ? b.getAffineConstantExpr(0)
                                    : b.getAffineDimExpr(d));
    SmallVector<AffineMap> maps = {
        b.getMultiDimIdentityMap(rank),
        AffineMap::get(rank, 0, outputDims, b.getContext())};
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

  /// `a` combined elementwise with `row`, a reduction along `dim` of the
  /// same shape but size 1 there.
  Value withRow(Location loc, Value a, Value row, int64_t dim,
                function_ref<Value(OpBuilder &, Location, Value, Value)> body) {
    auto type = cast<RankedTensorType>(a.getType());
    int64_t rank = type.getRank();
    SmallVector<AffineExpr> rowDims;
    for (int64_t d = 0; d < rank; ++d)
      rowDims.push_back(d == dim ? b.getAffineConstantExpr(0)
                                 : b.getAffineDimExpr(d));
    SmallVector<AffineMap> maps = {
        b.getMultiDimIdentityMap(rank),
        AffineMap::get(rank, 0, rowDims, b.getContext()),
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

  /// exp(x - max) / sum: a chain of reductions and elementwise generics.
  LogicalResult lowerSoftmax(SoftmaxOp op) {
    Location loc = op.getLoc();
    int64_t dim = op.getDim();
    Value max = reduceAlong(
        loc, op.getInput(), dim, -std::numeric_limits<double>::infinity(),
        [](OpBuilder &nb, Location nl, Value acc, Value x) -> Value {
          return arith::MaximumFOp::create(nb, nl, acc, x);
        });
    Value exps = withRow(loc, op.getInput(), max, dim,
                         [](OpBuilder &nb, Location nl, Value x, Value m) -> Value {
                           return math::ExpOp::create(
                               nb, nl, arith::SubFOp::create(nb, nl, x, m));
                         });
    Value sum = reduceAlong(loc, exps, dim, 0.0,
                            [](OpBuilder &nb, Location nl, Value acc,
                               Value x) -> Value {
                              return arith::AddFOp::create(nb, nl, acc, x);
                            });
    op.replaceAllUsesWith(
        withRow(loc, exps, sum, dim,
                [](OpBuilder &nb, Location nl, Value e, Value s) -> Value {
                  return arith::DivFOp::create(nb, nl, e, s);
                }));
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Gradient ops
  //===--------------------------------------------------------------------===//

  /// y * (dy - sum(dy * y)) along the softmax's dimension.
  LogicalResult lowerSoftmaxGrad(SoftmaxGradOp op) {
    Location loc = op.getLoc();
    int64_t dim = op.getDim();
    Value products = elementwise(
        loc, op.getType(), {op.getOutput(), op.getGrad()},
        [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          return arith::MulFOp::create(nb, nl, args[0], args[1]);
        });
    Value dot = reduceAlong(loc, products, dim, 0.0,
                            [](OpBuilder &nb, Location nl, Value acc,
                               Value x) -> Value {
                              return arith::AddFOp::create(nb, nl, acc, x);
                            });
    Value centred = withRow(loc, op.getGrad(), dot, dim,
                            [](OpBuilder &nb, Location nl, Value g,
                               Value d) -> Value {
                              return arith::SubFOp::create(nb, nl, g, d);
                            });
    op.replaceAllUsesWith(elementwise(
        loc, op.getType(), {op.getOutput(), centred},
        [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          return arith::MulFOp::create(nb, nl, args[0], args[1]);
        }));
    return success();
  }

  /// [K, N] = sum over rows of lhs^T rhs: one GEMM with A transposed.
  LogicalResult lowerWeightGrad(WeightGradOp op) {
    Location loc = op.getLoc();
    int64_t k = op.getType().getDimSize(0), n = op.getType().getDimSize(1);
    int64_t rows = numElements(op.getLhs()) / k;
    FailureOr<std::string> gemm = gemmKernel(op, op.getLhs(), op.getResult());
    if (failed(gemm))
      return failure();
    Value a = input(loc, op.getLhs()), g = input(loc, op.getRhs());
    Output c = output(loc, op.getType());
    call(loc, *gemm,
         {i32(loc, 1), i32(loc, 0), i64(loc, k), i64(loc, n), i64(loc, rows),
          f32(loc, 1.0f), a, i64(loc, k), g, i64(loc, n), f32(loc, 0.0f),
          c.view, i64(loc, n)});
    op.replaceAllUsesWith(tensor(loc, c));
    return success();
  }

  /// The bias gradient: a sum over every leading (token) dimension, which
  /// the runtime splits across threads by rows as well as columns.
  LogicalResult lowerSumTo(SumToOp op) {
    Location loc = op.getLoc();
    int64_t cols = numElements(op.getResult());
    Value input = this->input(loc, op.getInput());
    Output sum = output(loc, op.getType());
    call(loc, kernel("mrt_sum_rows", op.getInput()),
         {input, i64(loc, numElements(op.getInput()) / cols), i64(loc, cols),
          sum.view});
    op.replaceAllUsesWith(tensor(loc, sum));
    return success();
  }

  /// d/dx of GPT-2's GELU times the incoming gradient.
  LogicalResult lowerGeluGrad(GeluGradOp op) {
    op.replaceAllUsesWith(elementwise(
        op.getLoc(), op.getType(), {op.getInput(), op.getGrad()},
        [](OpBuilder &nb, Location loc, ValueRange args) -> Value {
          Type type = args[0].getType();
          auto constant = [&](double value) -> Value {
            return arith::ConstantOp::create(nb, loc,
                                             nb.getFloatAttr(type, value));
          };
          auto mul = [&](Value l, Value r) -> Value {
            return arith::MulFOp::create(nb, loc, l, r);
          };
          auto add = [&](Value l, Value r) -> Value {
            return arith::AddFOp::create(nb, loc, l, r);
          };
          Value x = args[0], square = mul(x, x);
          Value s = constant(MGT_GELU_SQRT_2_OVER_PI);
          Value t = math::TanhOp::create(
              nb, loc,
              mul(s, add(x, mul(constant(MGT_GELU_CUBIC), mul(square, x)))));
          Value sech2 = arith::SubFOp::create(nb, loc, constant(1.0), mul(t, t));
          Value inner = mul(s, add(constant(1.0),
                                   mul(constant(3 * MGT_GELU_CUBIC), square)));
          Value derivative = add(mul(constant(0.5), add(constant(1.0), t)),
                                 mul(mul(constant(0.5), x), mul(sech2, inner)));
          return mul(derivative, args[1]);
        }));
    return success();
  }

  /// The statistics are recomputed rather than stored from the forward.
  LogicalResult lowerLayerNormGrad(LayerNormGradOp op) {
    Location loc = op.getLoc();
    auto [rows, cols, stats] = normRows(op.getInput());
    Value x = input(loc, op.getInput()), w = input(loc, op.getWeight()),
          dy = input(loc, op.getGrad());
    Output mean = output(loc, stats), rstd = output(loc, stats);
    call(loc, kernel("mrt_layernorm_stats", op.getInput()),
         {x, mean.view, rstd.view, i64(loc, rows), i64(loc, cols),
          f32(loc, op.getEpsilon().convertToFloat())});
    Output dx = output(loc, op.getInputGrad().getType()),
           dw = output(loc, op.getWeightGrad().getType()),
           db = output(loc, op.getBiasGrad().getType());
    call(loc, kernel("mrt_layernorm_bwd", op.getInput()),
         {dy, x, w, mean.view, rstd.view, dx.view, dw.view, db.view,
          i64(loc, rows), i64(loc, cols)});
    op.getInputGrad().replaceAllUsesWith(tensor(loc, dx));
    op.getWeightGrad().replaceAllUsesWith(tensor(loc, dw));
    op.getBiasGrad().replaceAllUsesWith(tensor(loc, db));
    return success();
  }

  /// The forward is recomputed for its output and log-sum-exp, so the
  /// T x T probabilities are never stored.
  LogicalResult lowerAttentionGrad(AttentionGradOp op) {
    Location loc = op.getLoc();
    auto grad = op.getGrad().getType();
    int64_t batch = grad.getDimSize(0), seq = grad.getDimSize(1);
    int64_t heads = op.getNumHeads(), width = grad.getDimSize(2) / heads;
    Value qkv = input(loc, op.getQkv()), dout = input(loc, op.getGrad());
    Output out = output(loc, grad);
    Output lse = output(
        loc, RankedTensorType::get({batch, heads, seq}, b.getF32Type()));
    SmallVector<Value> sizes = {i64(loc, batch), i64(loc, seq),
                                i64(loc, heads), i64(loc, width)};
    SmallVector<Value> forward = {qkv, out.view, lse.view};
    forward.append(sizes);
    call(loc, kernel("mrt_attention_fwd", op.getQkv()), forward);
    Output dqkv = output(loc, op.getType());
    SmallVector<Value> backward = {qkv, out.view, dout, lse.view, dqkv.view};
    backward.append(sizes);
    call(loc, kernel("mrt_attention_bwd", op.getQkv()), backward);
    op.replaceAllUsesWith(tensor(loc, dqkv));
    return success();
  }

  LogicalResult lowerEmbeddingGrad(EmbeddingGradOp op) {
    Location loc = op.getLoc();
    auto table = op.getType();
    Value start = vocabStart(loc, op.getOffset());
    Value dy = input(loc, op.getGrad()), ids = input(loc, op.getIds());
    Output dtable = output(loc, table);
    // The kernel accumulates: rows no id selects stay zero.
    linalg::FillOp::create(b, loc, f32(loc, 0.0f), dtable.buffer);
    call(loc, kernel("mrt_embedding_bwd", op.getGrad()),
         {dy, ids, start, i64(loc, table.getDimSize(0)),
          i64(loc, table.getDimSize(1)), i64(loc, numElements(op.getIds())),
          dtable.view});
    op.replaceAllUsesWith(tensor(loc, dtable));
    return success();
  }

  /// The gradient of the rows used, zeros for the positions beyond.
  LogicalResult lowerPositionEmbeddingGrad(PositionEmbeddingGradOp op) {
    Location loc = op.getLoc();
    auto type = op.getType();
    Value init = tensor::EmptyOp::create(b, loc, type.getShape(),
                                         type.getElementType());
    Value zero =
        linalg::FillOp::create(
            b, loc,
            arith::ConstantOp::create(
                b, loc, b.getFloatAttr(type.getElementType(), 0.0))
                .getResult(),
            init)
            .getResult(0);
    auto grad = op.getGrad().getType();
    SmallVector<OpFoldResult> offsets(2, b.getIndexAttr(0)),
        strides(2, b.getIndexAttr(1));
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(grad.getDimSize(0)),
                                       b.getIndexAttr(grad.getDimSize(1))};
    op.replaceAllUsesWith(tensor::InsertSliceOp::create(
                              b, loc, op.getGrad(), zero, offsets, sizes,
                              strides)
                              .getResult());
    return success();
  }

  LogicalResult lowerXentGrad(XentGradOp op) {
    Location loc = op.getLoc();
    int64_t vocab = op.getLogits().getType().getShape().back();
    Value start = vocabStart(loc, op.getOffset());
    Value lossGrad = tensor::ExtractOp::create(b, loc, op.getLossGrad(),
                                               ValueRange());
    Value logits = input(loc, op.getLogits()),
          targets = input(loc, op.getTargets()), max = input(loc, op.getMax()),
          sumExp = input(loc, op.getSumExp());
    Output dlogits = output(loc, op.getType());
    call(loc, kernel("mrt_vocab_ce_bwd", op.getLogits()),
         {logits, targets, max, sumExp, i64(loc, numElements(op.getMax())),
          i64(loc, vocab), start, i64(loc, op.getValidVocab()), lossGrad,
          dlogits.view});
    op.replaceAllUsesWith(tensor(loc, dlogits));
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Optimizer ops
  //===--------------------------------------------------------------------===//

  /// Each input's sum of squares (double) goes into its slot of one buffer,
  /// in the device's memory on a GPU; one read adds them in order on the
  /// host, the only synchronisation of the group.
  LogicalResult lowerSumSquares(SumSquaresOp op) {
    Location loc = op.getLoc();
    for (Value grad : op.getInputs())
      if (!getElementTypeOrSelf(grad.getType()).isF32())
        return op.emitOpError("sums the squares of f32 gradients only, got ")
               << grad.getType();
    Type f64 = b.getF64Type();
    int64_t count = op.getInputs().size();
    Output sums = output(loc, RankedTensorType::get({count}, f64));
    for (auto [slot, grad] : llvm::enumerate(op.getInputs())) {
      call(loc, "mrt_sum_squares_f32",
           {input(loc, grad), i64(loc, numElements(grad)), sums.view,
            i64(loc, slot)});
    }
    SmallVector<Value> total;
    call(loc, "mrt_sum_f64", {sums.view, i64(loc, count)}, f64, &total);
    op.replaceAllUsesWith(
        arith::TruncFOp::create(b, loc, b.getF32Type(), total[0]).getResult());
    return success();
  }

  /// AdamW as one elementwise linalg.generic writing the parameter and both
  /// moments in their own buffers. The scalar factors are computed in double,
  /// as torch.optim.AdamW computes them in Python floats.
  LogicalResult lowerAdamW(AdamWOp op) {
    if (!op.getParam().getType().getElementType().isF32())
      return op.emitOpError("updates fp32 master weights only, got ")
             << op.getParam().getType();
    Location loc = op.getLoc();
    Type f64 = b.getF64Type(), f32Type = b.getF32Type();
    auto hyper = [&](int64_t index) -> Value {
      return arith::ExtFOp::create(b, loc, f64,
                                   scalar(loc, op.getHyperparameters(), index));
    };
    auto constant = [&](double value) -> Value {
      return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(value));
    };
    auto narrow = [&](Value value) -> Value {
      return arith::TruncFOp::create(b, loc, f32Type, value);
    };
    Value lr = hyper(MGT_HP_LR), beta1 = hyper(MGT_HP_BETA1),
          beta2 = hyper(MGT_HP_BETA2), eps = hyper(MGT_HP_EPS),
          decay = hyper(MGT_HP_WEIGHT_DECAY), step = hyper(MGT_HP_STEP);
    Value one = constant(1.0);
    Value correction1 = arith::SubFOp::create(
        b, loc, one, math::PowFOp::create(b, loc, beta1, step));
    Value correction2 = arith::SubFOp::create(
        b, loc, one, math::PowFOp::create(b, loc, beta2, step));
    Value stepSize = narrow(arith::DivFOp::create(b, loc, lr, correction1));
    Value correction2Sqrt = narrow(math::SqrtOp::create(b, loc, correction2));
    Value keep = narrow(arith::SubFOp::create(
        b, loc, one, arith::MulFOp::create(b, loc, lr, decay)));
    Value oneMinusBeta1 = narrow(arith::SubFOp::create(b, loc, one, beta1));
    Value oneMinusBeta2 = narrow(arith::SubFOp::create(b, loc, one, beta2));
    Value beta2f = narrow(beta2), epsf = narrow(eps);
    Value scale = op.getGradScale();
    bool decays = op.getDecay();

    auto type = op.getParam().getType();
    SmallVector<AffineMap> maps(4, b.getMultiDimIdentityMap(type.getRank()));
    SmallVector<utils::IteratorType> iterators(type.getRank(),
                                               utils::IteratorType::parallel);
    auto update = linalg::GenericOp::create(
        b, loc, TypeRange{type, type, type}, ValueRange{op.getGrad()},
        ValueRange{op.getParam(), op.getExpAvg(), op.getExpAvgSq()}, maps,
        iterators, [&](OpBuilder &nb, Location nl, ValueRange args) {
          auto mul = [&](Value l, Value r) -> Value {
            return arith::MulFOp::create(nb, nl, l, r);
          };
          auto add = [&](Value l, Value r) -> Value {
            return arith::AddFOp::create(nb, nl, l, r);
          };
          Value g = mul(args[0], scale);
          Value param = decays ? mul(args[1], keep) : args[1];
          Value m = add(args[2],
                        mul(oneMinusBeta1,
                            arith::SubFOp::create(nb, nl, g, args[2])));
          Value v = add(mul(args[3], beta2f), mul(oneMinusBeta2, mul(g, g)));
          Value denom = add(
              arith::DivFOp::create(nb, nl, math::SqrtOp::create(nb, nl, v),
                                    correction2Sqrt),
              epsf);
          Value newParam = arith::SubFOp::create(
              nb, nl, param,
              mul(stepSize, arith::DivFOp::create(nb, nl, m, denom)));
          linalg::YieldOp::create(nb, nl, ValueRange{newParam, m, v});
        });
    op.replaceAllUsesWith(update.getResults());
    return success();
  }

  ModuleOp module;
  Value ctx;
  OpBuilder b;
};

/// The runtime's kernels store f32 or bf16 (the _f32 and _bf16 variants).
static LogicalResult checkElementTypes(Operation *op) {
  for (Type type : llvm::concat<Type>(op->getOperandTypes(),
                                      op->getResultTypes())) {
    Type element = getElementTypeOrSelf(type);
    if (isa<FloatType>(element) && !element.isF32() && !element.isBF16())
      return op->emitOpError("has no runtime lowering for element type ")
             << element << "; the runtime stores f32 and bf16";
  }
  return success();
}

LogicalResult RuntimeLowering::lower(Operation *op) {
  b.setInsertionPoint(op);
  LogicalResult result =
      llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case([&](MatmulOp op) { return lowerMatmul(op); })
          .Case([&](LayerNormOp op) { return lowerLayerNorm(op); })
          .Case([&](AttentionOp op) { return lowerAttention(op); })
          .Case([&](EmbeddingOp op) { return lowerEmbedding(op); })
          .Case([&](PositionEmbeddingOp op) {
            return lowerPositionEmbedding(op);
          })
          .Case([&](BiasAddOp op) {
            return lowerSum(op, op.getInput(), op.getBias());
          })
          .Case([&](AddOp op) { return lowerSum(op, op.getLhs(), op.getRhs()); })
          .Case([&](GeluOp op) { return lowerGelu(op); })
          .Case([&](ConvertOp op) { return lowerConvert(op); })
          .Case([&](CrossEntropyOp op) { return lowerCrossEntropy(op); })
          .Case([&](XentMaxOp op) { return lowerXentMax(op); })
          .Case([&](XentSumExpOp op) { return lowerXentSumExp(op); })
          .Case([&](XentLossOp op) { return lowerXentLoss(op); })
          .Case([&](SoftmaxOp op) { return lowerSoftmax(op); })
          .Case([&](SoftmaxGradOp op) { return lowerSoftmaxGrad(op); })
          .Case([&](WeightGradOp op) { return lowerWeightGrad(op); })
          .Case([&](SumToOp op) { return lowerSumTo(op); })
          .Case([&](GeluGradOp op) { return lowerGeluGrad(op); })
          .Case([&](LayerNormGradOp op) { return lowerLayerNormGrad(op); })
          .Case([&](AttentionGradOp op) { return lowerAttentionGrad(op); })
          .Case([&](EmbeddingGradOp op) { return lowerEmbeddingGrad(op); })
          .Case([&](PositionEmbeddingGradOp op) {
            return lowerPositionEmbeddingGrad(op);
          })
          .Case([&](XentGradOp op) { return lowerXentGrad(op); })
          .Case([&](SumSquaresOp op) { return lowerSumSquares(op); })
          .Case([&](AdamWOp op) { return lowerAdamW(op); })
          .Case([&](FOp op) {
            // Identity forward; its all-reduce is the backward pass's.
            op.replaceAllUsesWith(op.getInput());
            return success();
          })
          .Case([&](GOp op) {
            return allReduce(op, op.getInput(), op.getAxis(), MRT_REDUCE_SUM);
          })
          .Case([&](AllReduceOp op) {
            return allReduce(op, op.getInput(), op.getAxis(),
                             op.getKind() == ReductionKind::sum ? MRT_REDUCE_SUM
                                                                : MRT_REDUCE_MAX);
          })
          .Case([&](AxisIndexOp op) { return lowerAxisIndex(op); })
          .Case([&](LocalSliceOp op) { return lowerLocalSlice(op); })
          .Case([&](AllGatherOp op) {
            return lowerGatherOrScatter(op, "mrt_all_gather",
                                        op.getInput().getType());
          })
          .Case([&](ReduceScatterOp op) {
            if (op.getKind() != ReductionKind::sum)
              return LogicalResult(op.emitOpError(
                  "has no runtime lowering for a max reduction"));
            return lowerGatherOrScatter(op, "mrt_reduce_scatter",
                                        op.getType());
          })
          .Default([&](Operation *op) -> LogicalResult {
            if (isa<TPDialect>(op->getDialect()))
              return op->emitOpError("has no runtime lowering");
            return success();
          });
  if (succeeded(result) && isa<TPDialect>(op->getDialect()))
    op->erase();
  return result;
}

/// The GELU of `sum` the GEMM's epilogue can compute too: cuBLASLt keeps
/// GELU's input (for the backward pass) only with a leading dimension that
/// is a multiple of 8.
static GeluOp epilogueGelu(Value sum) {
  if (cast<ShapedType>(sum.getType()).getShape().back() % 8 != 0)
    return {};
  for (Operation *user : sum.getUsers())
    if (auto gelu = dyn_cast<GeluOp>(user))
      return gelu;
  return {};
}

/// A GEMM whose one use adds a [N] bias writes the sum itself (cuBLASLt's
/// epilogue on a GPU), and the sum's GELU too when it has one: the QKV
/// projection's bias costs no pass over its output, and the MLP's
/// pre-activation and GELU come out of its GEMM. Bias adds the residual +
/// layer-norm call takes are gone by now.
LogicalResult RuntimeLowering::fuseGemmEpilogues(func::FuncOp function) {
  SmallVector<std::pair<MatmulOp, BiasAddOp>> matches;
  function.walk([&](MatmulOp gemm) {
    if (!gemm->hasOneUse())
      return;
    auto add = dyn_cast<BiasAddOp>(*gemm->getUsers().begin());
    if (add && add.getInput() == gemm.getResult() &&
        add.getBias().getType().getRank() == 1 &&
        definedBefore(add.getBias(), gemm))
      matches.push_back({gemm, add});
  });
  for (auto [gemm, add] : matches) {
    GeluOp gelu = epilogueGelu(add.getResult());
    b.setInsertionPoint(gemm);
    if (failed(lowerGemm(gemm, {add.getResult(), add.getBias(), gelu})))
      return failure();
    if (gelu)
      gelu.erase();
    add.erase();
    gemm.erase();
  }
  return success();
}

void RuntimeLowering::fuseResidualLayerNorms(func::FuncOp function) {
  struct Match {
    AddOp add;
    BiasAddOp branch;
    LayerNormOp norm;
  };
  SmallVector<Match> matches;
  llvm::SmallPtrSet<Operation *, 8> fusedAdds;
  function.walk([&](LayerNormOp norm) {
    auto add = norm.getInput().getDefiningOp<AddOp>();
    if (!add || fusedAdds.contains(add) ||
        !definedBefore(norm.getWeight(), add) ||
        !definedBefore(norm.getBias(), add))
      return;
    // The branch's bias add folds in only when this add is its one use.
    for (Value side : {add.getRhs(), add.getLhs()}) {
      auto branch = side.getDefiningOp<BiasAddOp>();
      if (branch && branch->hasOneUse()) {
        matches.push_back({add, branch, norm});
        fusedAdds.insert(add);
        return;
      }
    }
  });
  for (Match &match : matches)
    fuseResidualLayerNorm(match.add, match.branch, match.norm);
}

/// The rank's runtime context becomes the first argument; 0-d tensor
/// results (the loss) are returned as scalars.
Value addContextAndScalarResults(func::FuncOp function) {
  MLIRContext *context = function.getContext();
  // A result that updates an argument is written into that argument's
  // buffer: one-shot bufferization may then do so in place, and
  // drop-equivalent-buffer-results removes the result.
  for (unsigned i = 0; i < function.getNumResults(); ++i)
    if (auto index = function.getResultAttrOfType<IntegerAttr>(
            i, TPDialect::kUpdatesAttrName))
      function.setArgAttr(index.getInt(),
                          bufferization::BufferizationDialect::kWritableAttrName,
                          BoolAttr::get(context, true));
  auto ptr = LLVM::LLVMPointerType::get(context);
  (void)function.insertArgument(0, ptr, {}, function.getLoc());
  auto ret = cast<func::ReturnOp>(function.front().getTerminator());
  OpBuilder b(ret);
  SmallVector<Type> results;
  for (OpOperand &operand : ret->getOpOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.get().getType());
    if (type && type.getRank() == 0)
      operand.set(tensor::ExtractOp::create(b, ret.getLoc(), operand.get(),
                                            ValueRange()));
    results.push_back(operand.get().getType());
  }
  function.setType(
      FunctionType::get(context, function.getArgumentTypes(), results));
  return function.getArgument(0);
}

struct ConvertTPToRuntimePass
    : public megatron::impl::ConvertTPToRuntimeBase<ConvertTPToRuntimePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> functions = megatron::definedFunctions(module);
    for (func::FuncOp function : functions) {
      // Only the entry points generated around the step are exported; a
      // private step lets bufferization drop the results it wrote in place.
      function.setPrivate();
      Value ctx = addContextAndScalarResults(function);
      // Checked before any lowering, the fused ones included: kernel()
      // picks _f32 for anything that is not bf16.
      WalkResult types = function.walk([](Operation *op) {
        if (isa<TPDialect>(op->getDialect()) && failed(checkElementTypes(op)))
          return WalkResult::interrupt();
        return WalkResult::advance();
      });
      if (types.wasInterrupted())
        return signalPassFailure();
      RuntimeLowering lowering(module, ctx);
      lowering.fuseResidualLayerNorms(function);
      if (failed(lowering.fuseGemmEpilogues(function)))
        return signalPassFailure();
      SmallVector<Operation *> ops;
      function.walk([&](Operation *op) {
        if (isa<TPDialect>(op->getDialect()))
          ops.push_back(op);
      });
      for (Operation *op : ops)
        if (failed(lowering.lower(op)))
          return signalPassFailure();
    }
    // Shardings and the mesh only described the partition; the runtime's
    // manifest is made before this lowering.
    for (func::FuncOp function : functions) {
      for (unsigned i = 0; i < function.getNumArguments(); ++i)
        for (NamedAttribute attr : function.getArgAttrDict(i)
                                       ? function.getArgAttrDict(i).getValue()
                                       : ArrayRef<NamedAttribute>())
          if (isa_and_nonnull<TPDialect>(attr.getNameDialect()))
            function.removeArgAttr(i, attr.getName());
      for (unsigned i = 0; i < function.getNumResults(); ++i)
        for (NamedAttribute attr : function.getResultAttrDict(i)
                                       ? function.getResultAttrDict(i).getValue()
                                       : ArrayRef<NamedAttribute>())
          if (isa_and_nonnull<TPDialect>(attr.getNameDialect()))
            function.removeResultAttr(i, attr.getName());
    }
    for (auto mesh : llvm::make_early_inc_range(module.getOps<MeshOp>()))
      mesh.erase();
  }
};

} // namespace
