//===- RuntimeCalls.h - building blocks of the runtime lowering -*- C++ -*-===//
//
// What every pattern of convert-tp-to-runtime builds with: calls into the
// runtime on flat `memref<?xT>` buffers (read-only `bufferization.to_buffer`
// views of operands, fresh `memref.alloc` outputs handed back with
// `bufferization.to_tensor`, which one-shot bufferization understands), the
// kernel variant for a storage type, and the linalg generics of the
// elementwise and reduction chains.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_LIB_CONVERSION_TPTORUNTIME_RUNTIMECALLS_H
#define MEGATRON_LIB_CONVERSION_TPTORUNTIME_RUNTIMECALLS_H

#include "megatron/Conversion/TPToRuntime/TPToRuntime.h"
#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/IR/PatternMatch.h"

#include <string>

namespace mlir::megatron::runtime {

int64_t numElements(Value value);

/// The runtime's variant of kernel `base` for `storage`'s element type
/// (the pass admitted only f32 and bf16).
std::string kernel(StringRef base, Value storage);

/// A GEMM's runtime entry point: bf16 operands may write fp32 (the
/// parameter gradients).
FailureOr<std::string> gemmKernel(Operation *op, Value operand, Value result);

/// The runtime's id of mesh axis `axis` (megatron_rt/contract.h).
FailureOr<int64_t> runtimeAxis(Operation *op, StringRef axis);

/// A layer norm's input as rows of its last dimension, and the type of its
/// per-row statistics (mean, rstd).
struct NormRows {
  int64_t rows, cols;
  RankedTensorType stats;
};
NormRows normRows(Value input);

using ScalarBody = function_ref<Value(OpBuilder &, Location, ValueRange)>;
using Combine = function_ref<Value(OpBuilder &, Location, Value, Value)>;

/// Emits one op's lowering at the rewriter's insertion point, at `loc`.
class CallBuilder {
public:
  CallBuilder(RewriterBase &rewriter, Location loc) : b(rewriter), loc(loc) {}

  /// The rank's runtime context: the first argument of `op`'s function.
  static Value context(Operation *op);

  /// Calls `name`, declared (once) as an external function of these types.
  void call(StringRef name, ValueRange args, TypeRange results = {},
            SmallVectorImpl<Value> *out = nullptr);

  Value i64(int64_t value);
  Value i32(int64_t value);
  Value f32(float value);
  Value f64(double value);
  /// Element `index` of a 1-D tensor.
  Value scalar(Value tensor, int64_t index);

  /// A flat `memref<?xT, strided<[1], offset: ?>>` view of a contiguous
  /// static buffer.
  Value flat(Value buffer);
  /// The row-major buffer type of `type` at any offset: a member of a stack
  /// of layers, which the runtime reads where it lies.
  MemRefType contiguousAnywhere(RankedTensorType type);
  /// The buffer behind tensor `value`, read-only, as a flat view.
  Value input(Value value);
  /// A flat view `elements` past the start of flat view `view`: a section
  /// of a fused tensor, which a kernel reads at its own row stride.
  Value shifted(Value view, int64_t elements);

  /// A fresh buffer a kernel writes; `tensor()` hands it back to the tensor
  /// program once written.
  struct Output {
    Value buffer, view;
  };
  Output output(Type type);
  Value tensor(const Output &out);
  /// The buffer behind tensor `value`, which a kernel updates in place;
  /// `tensor()` hands it back as the updated value. No use of `value` may
  /// follow (the KV cache, threaded from layer to layer).
  Output inPlace(Value value);

  /// A linalg.generic over `result`'s shape whose element is read from
  /// `source` at the indices `where` computes from the iteration's indices
  /// and `perRow`'s i32 element of its first index (a sequence's position).
  using GatherIndices = function_ref<SmallVector<Value>(
      OpBuilder &, Location, ValueRange indices, Value rowValue)>;
  Value gather(RankedTensorType result, Value source, Value perRow,
               GatherIndices where);

  /// An op's index operand (the first row of this rank's vocabulary slice,
  /// a dropout's position or stream) as the kernels' int64_t: 0 when it
  /// has none.
  Value offsetI64(Value offset);
  /// A dropout's key as the kernels take it (megatron_rt/dropout.h): the
  /// seed and step of the step's hyperparameters, as int64_t.
  std::pair<Value, Value> dropoutKey(Value hyperparameters);

  /// An elementwise linalg.generic over `result`'s shape; `inputs` are
  /// indexed by the trailing dimensions they have. `body` computes in fp32
  /// whatever the storage: bf16 operands are widened, the result rounded.
  /// With `into` (a tensor of `result`'s type) the result accumulates into
  /// its buffer: the body reads into's element first, then the inputs'.
  /// Otherwise it fills a fresh buffer.
  Value elementwise(RankedTensorType result, ValueRange inputs,
                    ScalarBody body, Value into = {});

  /// Reduces `input` along `dim` with `combine`, starting from `init`; the
  /// result keeps the dimension (size 1) so it broadcasts back.
  Value reduceAlong(Value input, int64_t dim, double init, Combine combine);

  /// `a` combined elementwise with `row`, a reduction along `dim` of the
  /// same shape but size 1 there.
  Value withRow(Value a, Value row, int64_t dim, Combine body);

  RewriterBase &b;
  Location loc;
};

/// A pattern of this lowering: one op, the target's limits at hand (a copy:
/// patterns outlive whatever built them).
template <typename OpTy>
struct RuntimePattern : public OpRewritePattern<OpTy> {
  RuntimePattern(MLIRContext *context, const RuntimeTargetInfo &target,
                 PatternBenefit benefit = 1)
      : OpRewritePattern<OpTy>(context, benefit), target(target) {}
  const RuntimeTargetInfo target;
};

/// The GEMM of `op` (batch dimensions folded into its rows, against a
/// [K, N] weight) and its epilogue: the [N] `bias` add, then `gelu` of the
/// sum; `sum` is the value the call replaces. Shared by the plain GEMM
/// pattern and the epilogue fusion.
struct GemmEpilogue {
  Value sum;
  Value bias;
  tp::GeluOp gelu;
};
LogicalResult lowerGemm(RewriterBase &rewriter, tp::MatmulOp op,
                        GemmEpilogue epilogue);

/// The vocabulary-parallel cross-entropy pieces, shared by their patterns
/// and by the unsplit loss, which is the same recipe on one rank.
Value lowerXentMax(CallBuilder &c, tp::XentMaxOp op);
std::pair<Value, Value> lowerXentSumExp(CallBuilder &c, tp::XentSumExpOp op);
Value lowerXentLoss(CallBuilder &c, tp::XentLossOp op);

} // namespace mlir::megatron::runtime

#endif // MEGATRON_LIB_CONVERSION_TPTORUNTIME_RUNTIMECALLS_H
