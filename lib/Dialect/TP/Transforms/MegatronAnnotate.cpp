//===- MegatronAnnotate.cpp - Megatron-LM's sharding of a transformer -----===//
#include "megatron/Dialect/TP/IR/ShardingUtils.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Dialect/TP/Utils/Utils.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tp-megatron-annotate"

namespace mlir::megatron {
#define GEN_PASS_DEF_MEGATRONANNOTATE
#include "megatron/Dialect/TP/Transforms/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::tp;

namespace {

constexpr StringLiteral kMeshName = "mesh";
constexpr StringLiteral kAxis = MGT_AXIS_NAME_TP;
constexpr StringLiteral kDataAxis = MGT_AXIS_NAME_DP;
constexpr StringLiteral kMicroBatchAxis = megatron::kMicroBatchAxisName;
/// A mesh axis that splits the batch, and the option that sizes it.
struct BatchAxis {
  StringRef name, option;
  int64_t size;
};
/// The axes that split the batch, outermost first; only those of size > 1
/// are created.
std::array<BatchAxis, 2> batchAxes(int64_t dp, int64_t microBatches) {
  return {BatchAxis{kDataAxis, "dp", dp},
          BatchAxis{kMicroBatchAxis, "micro-batches", microBatches}};
}
/// Where a region's heads are fewer than the ranks (grouped-query
/// attention's key/value heads), "tp" is factored into the ranks' head
/// (major) and the replicas of each head (minor).
constexpr StringLiteral kHeadAxis = "tp_kv";
constexpr StringLiteral kReplicaAxis = "tp_rep";
/// Megatron pads the vocabulary to a multiple of this times the TP size.
constexpr int64_t kVocabPadMultiple = 128;

/// The GEMM `x * W (+ b)` that produced `value`, looking through its bias.
struct Linear {
  MatmulOp matmul;
  BiasAddOp bias;
};
std::optional<Linear> producingLinear(Value value) {
  Linear linear;
  if ((linear.bias = value.getDefiningOp<BiasAddOp>()))
    value = linear.bias.getInput();
  if (!(linear.matmul = value.getDefiningOp<MatmulOp>()))
    return std::nullopt;
  return linear;
}

class Annotator {
public:
  Annotator(func::FuncOp function, int64_t tp, int64_t dp,
            int64_t microBatches, bool sequenceParallel)
      : function(function), tp(tp), dp(dp), microBatches(microBatches),
        sequenceParallel(sequenceParallel),
        b(function.getContext()),
        meshRef(FlatSymbolRefAttr::get(function.getContext(), kMeshName)) {}

  LogicalResult annotate() {
    WalkResult result = function.walk([&](Operation *op) {
      if (auto region = dyn_cast<MegatronRegionOpInterface>(op))
        return WalkResult(annotateRegion(region));
      if (auto embedding = dyn_cast<EmbeddingOp>(op))
        return WalkResult(annotateEmbedding(embedding));
      if (auto matmul = dyn_cast<MatmulOp>(op); matmul && isLMHead(matmul))
        return WalkResult(annotateHead(matmul));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return failure();
    if (failed(splitBatches()) || failed(splitSequence()))
      return failure();
    replicateTheRest();
    return verifyDivisibility();
  }

private:
  /// Split = {dim -> sections} over `axes`; the other dims stay whole.
  ShardingAttr split(Value value, int64_t dim, int64_t sections = 1,
                     ArrayRef<StringRef> axes = {kAxis}) {
    auto type = cast<RankedTensorType>(value.getType());
    SmallVector<Attribute> dims(type.getRank(), b.getArrayAttr({}));
    dims[dim] = b.getStrArrayAttr(axes);
    SmallVector<int64_t> counts(type.getRank(), 1);
    counts[dim] = sections;
    return ShardingAttr::get(b.getContext(), meshRef, b.getArrayAttr(dims),
                             ArrayAttr(),
                             sections == 1 ? ArrayRef<int64_t>()
                                           : ArrayRef<int64_t>(counts));
  }

  /// Annotates a parameter unless the user already did.
  void annotateParameter(Value value, ShardingAttr sharding) {
    if (!isa<BlockArgument>(value) || getSharding(value))
      return;
    setSharding(value, sharding);
    LLVM_DEBUG(llvm::dbgs() << "annotated " << value << " as " << sharding
                            << "\n");
    annotated.push_back({value, sharding});
  }

  /// Splits the GEMM's columns over `axes`.
  void splitColumns(Linear linear, int64_t sections,
                    ArrayRef<StringRef> axes) {
    Value weight = linear.matmul.getRhs();
    int64_t columnDim = linear.matmul.getTransposeRhs() ? 0 : 1;
    annotateParameter(weight, split(weight, columnDim, sections, axes));
    if (linear.bias)
      annotateParameter(linear.bias.getBias(),
                        split(linear.bias.getBias(), 0, sections, axes));
  }

  /// The axes columns of `heads` whole heads split over: "tp", or where the
  /// heads are fewer than the ranks, the ranks' head sub-axis (each head's
  /// columns replicated on the tp / heads ranks sharing it), which the mesh
  /// then declares; one head (multi-query attention) is on every rank.
  FailureOr<SmallVector<StringRef>> columnAxes(Operation *op, int64_t heads) {
    if (heads == 0 || heads % tp == 0)
      return SmallVector<StringRef>{kAxis};
    if (heads == 1)
      return SmallVector<StringRef>{};
    auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(function, meshRef);
    SmallVector<StringRef> subAxes = mesh.getSubAxes(kAxis);
    if (subAxes.empty())
      mesh.setSubAxes(kAxis, {kHeadAxis, kReplicaAxis}, {heads, tp / heads});
    else if (mesh.getAxisSize(subAxes.front()) != heads)
      return op->emitError("heads are split over ")
             << *mesh.getAxisSize(subAxes.front())
             << " groups of ranks elsewhere; one mesh cannot also split "
             << heads << " of them";
    return SmallVector<StringRef>{mesh.getSubAxes(kAxis).front()};
  }

  /// The GEMM consuming `value` (the block's second GEMM) is split by rows.
  void splitRowsOfConsumers(Value value) {
    for (Operation *user : value.getUsers())
      if (auto matmul = dyn_cast<MatmulOp>(user))
        if (matmul.getLhs() == value)
          annotateParameter(matmul.getRhs(),
                            split(matmul.getRhs(),
                                  matmul.getTransposeRhs() ? 1 : 0));
  }

  /// The GEMMs into the region by columns, the GEMMs out of it by rows.
  LogicalResult annotateRegion(MegatronRegionOpInterface region) {
    if (failed(region.verifyTensorParallelSize(tp)))
      return failure();
    for (OpOperand &input : region->getOpOperands()) {
      if (!isa<FloatType>(getElementTypeOrSelf(input.get().getType())))
        continue;
      std::optional<Linear> in = producingLinear(input.get());
      if (!in)
        continue;
      FailureOr<SmallVector<StringRef>> axes = columnAxes(
          region, region.getColumnHeads(input.getOperandNumber()));
      if (failed(axes))
        return failure();
      splitColumns(*in, region.getColumnSections(), *axes);
    }
    for (Value result : region->getResults())
      splitRowsOfConsumers(result);
    return success();
  }

  LogicalResult annotateEmbedding(EmbeddingOp embedding) {
    auto table = dyn_cast<BlockArgument>(embedding.getTable());
    if (!table || getSharding(table))
      return success();
    if (failed(padVocabulary(table, 0, embedding)))
      return failure();
    annotateParameter(table, split(table, 0));
    return success();
  }

  /// The LM head: a GEMM whose every use is the loss or a generation step's
  /// logits output.
  bool isLMHead(MatmulOp matmul) {
    return !matmul->use_empty() &&
           llvm::all_of(matmul->getUsers(), [&](Operation *op) {
             return isa<CrossEntropyOp>(op) || logitsOutput(op);
           });
  }

  /// The vocabulary dimension of an LM head's weight: rows of a [V, C]
  /// table (x * W^T), columns of a [C, V] one.
  static unsigned vocabDim(MatmulOp head) {
    return head.getTransposeRhs() ? 0 : 1;
  }

  /// The LM head's weight splits by vocabulary, tied to the embedding (the
  /// embedding's table came first and is annotated) or not: the logits
  /// stay vocabulary-parallel into the loss.
  LogicalResult annotateHead(MatmulOp head) {
    auto weight = dyn_cast<BlockArgument>(head.getRhs());
    if (!weight || getSharding(weight))
      return success();
    unsigned dim = vocabDim(head);
    if (failed(padVocabulary(weight, dim, head)))
      return failure();
    annotateParameter(weight, split(weight, dim));
    return success();
  }

  /// A vocabulary that tp does not divide grows to a multiple of 128 * tp
  /// along `dim` of `table` (an embedding table, an LM head's weight, or
  /// both when tied); the heads' logits grow with it, and the loss keeps
  /// its valid_vocab so padded logits never reach it.
  LogicalResult padVocabulary(BlockArgument table, unsigned dim,
                              Operation *anchor) {
    auto type = cast<RankedTensorType>(table.getType());
    int64_t vocab = type.getDimSize(dim);
    if (vocab % tp == 0)
      return success();
    int64_t multiple = 0, padded = 0;
    if (__builtin_mul_overflow(kVocabPadMultiple, tp, &multiple) ||
        __builtin_add_overflow(vocab, multiple - 1, &padded))
      return anchor->emitError("cannot pad the vocabulary of ")
             << vocab << " rows to a multiple of " << kVocabPadMultiple
             << " x tp=" << tp << ": the size overflows 64 bits";
    padded = padded / multiple * multiple;
    for (Operation *user : table.getUsers()) {
      if (isa<EmbeddingOp>(user) && dim == 0)
        continue;
      auto head = dyn_cast<MatmulOp>(user);
      if (!head || head.getRhs() != table || vocabDim(head) != dim ||
          !isLMHead(head))
        return user->emitError("cannot pad the vocabulary from ")
               << vocab << " to " << padded
               << " rows: the table is used other than by the embedding and "
                  "an LM head feeding the loss or the logits output";
    }
    setUnpadded(table);
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] = padded;
    table.setType(type.clone(shape));
    for (Operation *user : table.getUsers())
      if (auto head = dyn_cast<MatmulOp>(user)) {
        head.getResult().setType(withVocab(head.getType(), padded));
        for (Operation *write : head->getUsers())
          if (BlockArgument output = logitsOutput(write))
            padLogitsOutput(cast<bufferization::MaterializeInDestinationOp>(write),
                            output, padded);
      }
    function.setType(b.getFunctionType(function.front().getArgumentTypes(),
                                       function.getResultTypes()));
    return success();
  }

  static RankedTensorType withVocab(RankedTensorType logits, int64_t vocab) {
    SmallVector<int64_t> shape(logits.getShape());
    shape.back() = vocab;
    return logits.clone(shape);
  }

  /// The argument `op` writes the logits into (a generation step's output),
  /// or null.
  BlockArgument logitsOutput(Operation *op) {
    auto write = dyn_cast<bufferization::MaterializeInDestinationOp>(op);
    auto output =
        write ? dyn_cast<BlockArgument>(write.getDest()) : BlockArgument();
    if (!output || output.getOwner()->getParentOp() != function ||
        getArgumentKind(function, output.getArgNumber()).role !=
            ArgumentRole::Logits)
      return {};
    return output;
  }

  void setUnpadded(BlockArgument arg) {
    function.setArgAttr(
        arg.getArgNumber(), TPDialect::kUnpaddedShapeAttrName,
        b.getDenseI64ArrayAttr(cast<ShapedType>(arg.getType()).getShape()));
  }

  /// The logits output grows with the head; the launcher reads its
  /// unpadded shape.
  void padLogitsOutput(bufferization::MaterializeInDestinationOp write,
                       BlockArgument output, int64_t padded) {
    setUnpadded(output);
    output.setType(withVocab(cast<RankedTensorType>(output.getType()), padded));
    write.getResult().setType(cast<TensorType>(output.getType()));
    auto ret = cast<func::ReturnOp>(function.front().getTerminator());
    function.setType(b.getFunctionType(function.front().getArgumentTypes(),
                                       ret.getOperandTypes()));
  }

  /// Data parallelism: each dp rank takes its rows of the global batch, the
  /// leading dimension of the tokens and the targets, and each micro-batch
  /// its rows of those; tp-propagate carries the split through every
  /// activation.
  LogicalResult splitBatches() {
    SmallVector<StringRef> axes = batchSplitAxes();
    if (axes.empty())
      return success();
    for (BlockArgument arg : function.getArguments()) {
      ArgumentRole role = getArgumentKind(function, arg.getArgNumber()).role;
      if (role != ArgumentRole::Tokens && role != ArgumentRole::Targets)
        continue;
      int64_t rows = cast<ShapedType>(arg.getType()).getDimSize(0);
      int64_t parts = 0;
      bool overflows = __builtin_mul_overflow(dp, microBatches, &parts);
      if (overflows || rows % parts != 0) {
        InFlightDiagnostic diag =
            emitError(arg.getLoc())
            << "the batch of " << rows << " rows ("
            << stringifyArgumentRole(role) << ") cannot be split into dp="
            << dp << " x micro-batches=" << microBatches;
        if (overflows)
          return diag << " parts: their product overflows 64 bits";
        return diag << " = " << parts << " equal parts";
      }
      annotateParameter(arg, split(arg, 0, 1, axes));
    }
    return success();
  }

  /// The axes the batch is split over (those of size > 1).
  SmallVector<StringRef> batchSplitAxes() {
    SmallVector<StringRef> axes;
    for (BatchAxis axis : batchAxes(dp, microBatches))
      if (axis.size > 1)
        axes.push_back(axis.name);
    return axes;
  }

  /// Sequence parallelism: the residual stream, the [batch, sequence,
  /// width] input of every norm, has its sequence split over "tp" (its
  /// batch as splitBatches splits it). Propagation carries the split through
  /// the norms and residual adds; a column-parallel GEMM, whose columns
  /// take "tp", gathers its input, and the sum leaving a row-parallel one
  /// is scattered: Megatron's sequence parallelism, found rather than
  /// written.
  LogicalResult splitSequence() {
    if (!sequenceParallel || tp == 1)
      return success();
    if (isGenerationEntry(function))
      return function.emitError(
          "sequence parallelism splits a training step's sequence; a "
          "generation step decodes one position at a time");
    WalkResult result = function.walk([&](Operation *op) {
      if (!isa<LayerNormOp, RMSNormOp>(op))
        return WalkResult::advance();
      Value stream = op->getOperand(0);
      auto type = cast<RankedTensorType>(stream.getType());
      if (type.getRank() != 3 || getSharding(stream))
        return WalkResult::advance();
      if (type.getDimSize(1) % tp != 0) {
        op->emitError("sequence parallelism splits the sequence of ")
            << type.getDimSize(1) << " positions over tp=" << tp
            << ", which does not divide it";
        return WalkResult::interrupt();
      }
      SmallVector<Attribute> dims = {b.getStrArrayAttr(batchSplitAxes()),
                                     b.getStrArrayAttr({kAxis}),
                                     b.getArrayAttr({})};
      setSharding(stream, ShardingAttr::get(b.getContext(), meshRef,
                                            b.getArrayAttr(dims), ArrayAttr(),
                                            {}));
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }

  /// Layer norms, row-parallel biases and the position embedding: whole.
  /// The other float arguments (a generation step's KV cache and logits)
  /// take the shardings of the ops that use them.
  void replicateTheRest() {
    for (BlockArgument arg : function.getArguments())
      if (isParameter(function, arg.getArgNumber()))
        annotateParameter(arg, getReplicated(meshRef, arg.getType()));
  }

  /// Every width split across ranks must divide: a located error otherwise.
  LogicalResult verifyDivisibility() {
    SymbolTableCollection symbols;
    for (auto [value, sharding] : annotated) {
      // Located at the parameter's first use; an unused one at the function.
      Operation *anchor = value.use_empty() ? function.getOperation()
                                            : *value.getUsers().begin();
      if (failed(verifyShardingForType(anchor, sharding, value.getType(),
                                       symbols)))
        return failure();
    }
    return success();
  }

  func::FuncOp function;
  int64_t tp, dp, microBatches;
  bool sequenceParallel;
  OpBuilder b;
  FlatSymbolRefAttr meshRef;
  SmallVector<std::pair<Value, ShardingAttr>> annotated;
};

struct MegatronAnnotatePass
    : public megatron::impl::MegatronAnnotateBase<MegatronAnnotatePass> {
  using MegatronAnnotateBase::MegatronAnnotateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyGlobalProgram(module, getArgument())))
      return signalPassFailure();
    if (tp < 1 || dp < 1 || microBatches < 1) {
      module.emitError("tp, dp and micro-batches must be positive, got tp=")
          << tp.getValue() << ", dp=" << dp.getValue()
          << " and micro-batches=" << microBatches.getValue();
      return signalPassFailure();
    }
    if (failed(createMesh(module)))
      return signalPassFailure();
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal() &&
          failed(Annotator(function, tp, dp, microBatches, sequenceParallel)
                     .annotate()))
        return signalPassFailure();
  }

  LogicalResult createMesh(ModuleOp module) {
    SymbolTable symbols(module);
    if (auto existing = symbols.lookup<MeshOp>(kMeshName)) {
      if (!existing.getAxisSize(kAxis))
        return existing.emitError("mesh @")
               << kMeshName << " exists without a \"" << kAxis << "\" axis";
      if (existing.getAxisSize(kAxis) != tp)
        return existing.emitError("mesh @")
               << kMeshName << " exists with another \"" << kAxis
               << "\" size than tp=" << tp.getValue();
      for (BatchAxis axis : batchAxes(dp, microBatches))
        if (existing.getAxisSize(axis.name).value_or(1) != axis.size)
          return existing.emitError("mesh @")
                 << kMeshName << " exists with another \"" << axis.name
                 << "\" size than " << axis.option << "=" << axis.size;
      return success();
    }
    // Axes only where they split: a tensor-parallel program's mesh is
    // ["tp" = N] alone. Rank r is (r / tp, r % tp): tp neighbours, as
    // Megatron keeps a tensor-parallel group inside a node.
    SmallVector<StringRef> axes;
    SmallVector<int64_t> sizes;
    for (BatchAxis axis : batchAxes(dp, microBatches))
      if (axis.size > 1) {
        axes.push_back(axis.name);
        sizes.push_back(axis.size);
      }
    axes.push_back(kAxis);
    sizes.push_back(tp);
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    MeshOp::create(b, module.getLoc(), kMeshName, b.getStrArrayAttr(axes),
                   b.getDenseI64ArrayAttr(sizes), /*sub_axis_names=*/nullptr,
                   /*sub_axis_sizes=*/nullptr, /*sub_axis_parents=*/nullptr);
    return success();
  }
};

} // namespace
