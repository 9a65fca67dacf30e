//===- TPOps.cpp - tp operations: verifiers and custom syntax -------------===//
#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::tp;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, ", ");
  os << "]";
  return text;
}

/// Emits "<what> has shape [..] but <expected> [..]" unless the shapes agree.
static LogicalResult expectShape(Operation *op, StringRef what,
                                 ArrayRef<int64_t> actual,
                                 ArrayRef<int64_t> expected) {
  if (actual == expected)
    return success();
  return op->emitOpError() << what << " has shape " << shapeString(actual)
                           << " but " << shapeString(expected)
                           << " is expected";
}

static LogicalResult expectSameElementType(Operation *op, Type expected,
                                           Type actual, StringRef what) {
  if (getElementTypeOrSelf(expected) == getElementTypeOrSelf(actual))
    return success();
  return op->emitOpError() << what << " has element type "
                           << getElementTypeOrSelf(actual) << " but "
                           << getElementTypeOrSelf(expected) << " is expected";
}

/// A result that accumulates (a loss, a parameter gradient) may be wider
/// than its inputs, never narrower.
static LogicalResult expectAtLeastAsWide(Operation *op, Type input,
                                         Type result, StringRef what) {
  auto in = cast<FloatType>(getElementTypeOrSelf(input));
  auto out = cast<FloatType>(getElementTypeOrSelf(result));
  if (out.getWidth() >= in.getWidth())
    return success();
  return op->emitOpError() << what << " has element type " << out
                           << ", narrower than " << in;
}

static bool isValidDim(int64_t dim, int64_t rank) {
  return dim >= 0 && dim < rank;
}

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

/// Parses `["dp" = 1, "tp" = 4]`.
/// `"name" = size` of an axis or a sub-axis.
static ParseResult parseNamedSize(OpAsmParser &parser, std::string &name,
                                  int64_t &size) {
  return failure(parser.parseString(&name) || parser.parseEqual() ||
                 parser.parseInteger(size));
}

/// `["dp" = 2, "tp" = 4 ["tp_kv" = 2, "tp_rep" = 2]]`: the axes, each with
/// its sub-axes where it is factored.
static ParseResult parseMeshAxes(OpAsmParser &parser, ArrayAttr &names,
                                 DenseI64ArrayAttr &sizes, ArrayAttr &subNames,
                                 DenseI64ArrayAttr &subSizes,
                                 ArrayAttr &subParents) {
  Builder &b = parser.getBuilder();
  SmallVector<Attribute> nameAttrs, subNameAttrs, subParentAttrs;
  SmallVector<int64_t> sizeValues, subSizeValues;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size = 0;
    if (parseNamedSize(parser, name, size))
      return failure();
    nameAttrs.push_back(b.getStringAttr(name));
    sizeValues.push_back(size);
    auto parseSubAxis = [&]() -> ParseResult {
      std::string subName;
      int64_t subSize = 0;
      if (parseNamedSize(parser, subName, subSize))
        return failure();
      subNameAttrs.push_back(b.getStringAttr(subName));
      subSizeValues.push_back(subSize);
      subParentAttrs.push_back(b.getStringAttr(name));
      return success();
    };
    return parser.parseCommaSeparatedList(
        OpAsmParser::Delimiter::OptionalSquare, parseSubAxis);
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square,
                                     parseAxis))
    return failure();
  names = b.getArrayAttr(nameAttrs);
  sizes = b.getDenseI64ArrayAttr(sizeValues);
  if (!subNameAttrs.empty()) {
    subNames = b.getArrayAttr(subNameAttrs);
    subSizes = b.getDenseI64ArrayAttr(subSizeValues);
    subParents = b.getArrayAttr(subParentAttrs);
  }
  return success();
}

static void printMeshAxes(OpAsmPrinter &printer, MeshOp mesh, ArrayAttr names,
                          DenseI64ArrayAttr sizes, ArrayAttr, DenseI64ArrayAttr,
                          ArrayAttr) {
  printer << "[";
  llvm::interleaveComma(
      llvm::zip(names.getAsValueRange<StringAttr>(), sizes.asArrayRef()),
      printer, [&](auto axis) {
        auto [name, size] = axis;
        printer << '"' << name << "\" = " << size;
        SmallVector<StringRef> subAxes = mesh.getSubAxes(name);
        if (subAxes.empty())
          return;
        printer << " [";
        llvm::interleaveComma(subAxes, printer, [&](StringRef sub) {
          printer << '"' << sub << "\" = " << *mesh.getAxisSize(sub);
        });
        printer << "]";
      });
  printer << "]";
}

LogicalResult MeshOp::verify() {
  if (getAxisNames().empty())
    return emitOpError("needs at least one axis");
  if (getAxisNames().size() != getAxisSizes().size())
    return emitOpError("has ") << getAxisNames().size() << " axis names but "
                               << getAxisSizes().size() << " sizes";
  llvm::StringSet<> seen;
  auto checkAxis = [&](StringRef axis, int64_t size) -> LogicalResult {
    if (axis.empty())
      return emitOpError("axis names must not be empty");
    if (!seen.insert(axis).second)
      return emitOpError("axis \"") << axis << "\" is declared twice";
    if (size < 1)
      return emitOpError("axis \"") << axis << "\" has size " << size
                                    << "; sizes must be positive";
    return success();
  };
  for (auto [name, size] : llvm::zip(getAxisNames(), getAxisSizes()))
    if (failed(checkAxis(cast<StringAttr>(name).getValue(), size)))
      return failure();
  if (!getSubAxisNames())
    return success();
  ArrayRef<int64_t> subSizes = getSubAxisSizes().value_or(ArrayRef<int64_t>());
  ArrayAttr parents = getSubAxisParentsAttr();
  if (!parents || subSizes.size() != getSubAxisNamesAttr().size() ||
      parents.size() != subSizes.size())
    return emitOpError("needs a size and a parent axis for each sub-axis");
  for (auto [name, size] : llvm::zip(getSubAxisNamesAttr(), subSizes)) {
    if (failed(checkAxis(cast<StringAttr>(name).getValue(), size)))
      return failure();
    // A sub-axis of size 1 splits nothing; with one, a split over the
    // others would be the axis's split spelled two ways.
    if (size == 1)
      return emitOpError("sub-axis \"")
             << cast<StringAttr>(name).getValue() << "\" has size 1";
  }
  for (auto [name, size] : llvm::zip(getAxisNames(), getAxisSizes())) {
    StringRef axis = cast<StringAttr>(name).getValue();
    SmallVector<StringRef> subAxes = getSubAxes(axis);
    int64_t product = 1;
    for (StringRef sub : subAxes)
      product *= *getAxisSize(sub);
    if (!subAxes.empty() && product != size)
      return emitOpError("the sub-axes of \"")
             << axis << "\" multiply to " << product << ", not its size "
             << size;
  }
  for (StringRef parent : parents.getAsValueRange<StringAttr>())
    if (!llvm::is_contained(getAxisNames().getAsValueRange<StringAttr>(),
                            parent))
      return emitOpError("sub-axes of \"") << parent
                                           << "\", which is not an axis";
  return success();
}

std::optional<int64_t> MeshOp::getAxisSize(StringRef axis) {
  for (auto [name, size] : llvm::zip(getAxisNames(), getAxisSizes()))
    if (cast<StringAttr>(name).getValue() == axis)
      return size;
  if (getSubAxisNames())
    for (auto [name, size] :
         llvm::zip(getSubAxisNamesAttr(), *getSubAxisSizes()))
      if (cast<StringAttr>(name).getValue() == axis)
        return size;
  return std::nullopt;
}

SmallVector<StringRef> MeshOp::getSubAxes(StringRef axis) {
  SmallVector<StringRef> subAxes;
  if (getSubAxisNames())
    for (auto [name, parent] :
         llvm::zip(getSubAxisNamesAttr().getAsValueRange<StringAttr>(),
                   getSubAxisParentsAttr().getAsValueRange<StringAttr>()))
      if (parent == axis)
        subAxes.push_back(name);
  return subAxes;
}

std::optional<MeshOp::SubAxis> MeshOp::getSubAxis(StringRef axis) {
  if (!getSubAxisNames())
    return std::nullopt;
  for (auto [name, parent] :
       llvm::zip(getSubAxisNamesAttr().getAsValueRange<StringAttr>(),
                 getSubAxisParentsAttr().getAsValueRange<StringAttr>())) {
    if (name != axis)
      continue;
    SmallVector<StringRef> siblings = getSubAxes(parent);
    int64_t stride = 1;
    for (StringRef minor : llvm::reverse(siblings)) {
      if (minor == axis)
        break;
      stride *= *getAxisSize(minor);
    }
    return SubAxis{parent, stride, *getAxisSize(axis)};
  }
  return std::nullopt;
}

SmallVector<StringRef> MeshOp::expandAxes(ArrayRef<StringRef> axes) {
  SmallVector<StringRef> expanded;
  for (StringRef axis : axes) {
    SmallVector<StringRef> subAxes = getSubAxes(axis);
    if (subAxes.empty())
      expanded.push_back(axis);
    else
      expanded.append(subAxes);
  }
  return expanded;
}

SmallVector<StringRef> MeshOp::canonicalAxes(ArrayRef<StringRef> axes) {
  SmallVector<StringRef> canonical;
  for (size_t i = 0; i < axes.size();) {
    std::optional<SubAxis> sub = getSubAxis(axes[i]);
    SmallVector<StringRef> run = sub ? getSubAxes(sub->parent)
                                     : SmallVector<StringRef>();
    if (sub && axes.drop_front(i).take_front(run.size()) ==
                   ArrayRef<StringRef>(run)) {
      canonical.push_back(sub->parent);
      i += run.size();
      continue;
    }
    canonical.push_back(axes[i++]);
  }
  return canonical;
}

void MeshOp::setSubAxes(StringRef axis, ArrayRef<StringRef> names,
                        ArrayRef<int64_t> sizes) {
  Builder b(getContext());
  SmallVector<Attribute> subNames, parents;
  SmallVector<int64_t> subSizes;
  if (getSubAxisNames())
    for (auto [name, size, parent] :
         llvm::zip(getSubAxisNamesAttr(), *getSubAxisSizes(),
                   getSubAxisParentsAttr()))
      if (cast<StringAttr>(parent).getValue() != axis) {
        subNames.push_back(name);
        subSizes.push_back(size);
        parents.push_back(parent);
      }
  for (auto [name, size] : llvm::zip(names, sizes)) {
    subNames.push_back(b.getStringAttr(name));
    subSizes.push_back(size);
    parents.push_back(b.getStringAttr(axis));
  }
  setSubAxisNamesAttr(b.getArrayAttr(subNames));
  setSubAxisSizesAttr(b.getDenseI64ArrayAttr(subSizes));
  setSubAxisParentsAttr(b.getArrayAttr(parents));
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  if (!getIds().getType().getElementType().isInteger(32))
    return emitOpError("ids must be i32 token ids");
  auto table = getTable().getType();
  if (table.getRank() != 2)
    return emitOpError("table must be [vocab, width], got rank ")
           << table.getRank();
  SmallVector<int64_t> expected(getIds().getType().getShape());
  expected.push_back(table.getDimSize(1));
  if (failed(expectSameElementType(*this, table, getType(), "result")))
    return failure();
  return expectShape(*this, "result", getType().getShape(), expected);
}

LogicalResult PositionEmbeddingOp::verify() {
  auto table = getTable().getType();
  auto result = getType();
  if (table.getRank() != 2 || result.getRank() != 2)
    return emitOpError("table and result must be [positions, width]");
  if (result.getDimSize(0) > table.getDimSize(0))
    return emitOpError("needs ")
           << result.getDimSize(0) << " positions but the table has "
           << table.getDimSize(0);
  if (failed(expectSameElementType(*this, table, result, "result")))
    return failure();
  return expectShape(*this, "result width", result.getDimSize(1),
                     table.getDimSize(1));
}

/// A norm's `what` ([C], the input's element type) over the last dimension C
/// of `input` (named `inputName`).
static LogicalResult verifyNormVector(Operation *op, StringRef inputName,
                                      RankedTensorType input, StringRef what,
                                      RankedTensorType vector) {
  if (input.getRank() < 1)
    return op->emitOpError() << inputName
                             << " must have at least one dimension";
  if (failed(expectSameElementType(op, input, vector, what)))
    return failure();
  return expectShape(op, what, vector.getShape(),
                     input.getDimSize(input.getRank() - 1));
}

LogicalResult LayerNormOp::verify() {
  return verifyNormVector(*this, "input", getInput().getType(), "weight",
                          getWeight().getType());
}

LogicalResult ResidualLayerNormOp::verify() {
  return verifyNormVector(*this, "residual", getResidual().getType(), "bias",
                          getBias().getType());
}

LogicalResult RMSNormOp::verify() {
  return verifyNormVector(*this, "input", getInput().getType(), "weight",
                          getWeight().getType());
}

LogicalResult ResidualRMSNormOp::verify() {
  return verifyNormVector(*this, "residual", getResidual().getType(),
                          "weight", getWeight().getType());
}

LogicalResult MatmulOp::verify() {
  auto lhs = getLhs().getType();
  auto rhs = getRhs().getType();
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOpError("operands must have rank 2 or more");
  if (rhs.getRank() != 2 && rhs.getRank() != lhs.getRank())
    return emitOpError("rhs must be a [K, N] matrix or have the lhs's rank ")
           << lhs.getRank() << ", got rank " << rhs.getRank();
  ArrayRef<int64_t> batch = lhs.getShape().drop_back(2);
  if (rhs.getRank() != 2 &&
      failed(expectShape(*this, "rhs batch", rhs.getShape().drop_back(2),
                         batch)))
    return failure();
  int64_t lhsRows = lhs.getShape().end()[-2], lhsCols = lhs.getShape().back();
  int64_t rhsRows = rhs.getShape().end()[-2], rhsCols = rhs.getShape().back();
  if (getTransposeLhs())
    std::swap(lhsRows, lhsCols);
  if (getTransposeRhs())
    std::swap(rhsRows, rhsCols);
  if (lhsCols != rhsRows)
    return emitOpError("contracting sizes differ: lhs has ")
           << lhsCols << ", rhs has " << rhsRows;
  if (failed(expectSameElementType(*this, lhs, rhs, "rhs")) ||
      failed(expectSameElementType(*this, lhs, getType(), "result")))
    return failure();
  SmallVector<int64_t> expected(batch);
  expected.append({lhsRows, rhsCols});
  return expectShape(*this, "result", getType().getShape(), expected);
}

LogicalResult BiasAddOp::verify() {
  ArrayRef<int64_t> input = getInput().getType().getShape();
  ArrayRef<int64_t> bias = getBias().getType().getShape();
  if (bias.size() > input.size() ||
      input.take_back(bias.size()) != bias)
    return emitOpError("bias shape ")
           << shapeString(bias) << " is not a suffix of the input shape "
           << shapeString(input);
  return expectSameElementType(*this, getInput().getType(),
                               getBias().getType(), "bias");
}

/// A fused [B, T, 3C] qkv of `heads` heads and the [B, T, C] attention it
/// gives, as tp.attention and tp.cached_attention take them.
static LogicalResult verifyFusedQkv(Operation *op, RankedTensorType qkv,
                                    int64_t heads, RankedTensorType result) {
  if (qkv.getRank() != 3)
    return op->emitOpError("qkv must be [batch, seq, 3 * width], got rank ")
           << qkv.getRank();
  int64_t fused = qkv.getDimSize(2);
  if (fused % 3 != 0)
    return op->emitOpError("qkv width ") << fused << " is not 3 * width";
  int64_t width = fused / 3;
  if (width % heads != 0)
    return op->emitOpError("num_heads ")
           << heads << " does not divide the embedding width " << width;
  if (failed(expectSameElementType(op, qkv, result, "result")))
    return failure();
  return expectShape(op, "result", result.getShape(),
                     {qkv.getDimSize(0), qkv.getDimSize(1), width});
}

/// One position (or chunk start) per sequence of a [B, ...] batch.
static LogicalResult expectPerSequence(Operation *op, StringRef what,
                                       RankedTensorType perSequence,
                                       int64_t batch) {
  if (!perSequence.getElementType().isInteger(32))
    return op->emitOpError() << what << " must hold i32, not "
                             << perSequence.getElementType();
  return expectShape(op, what, perSequence.getShape(), {batch});
}

/// Separate q `[B, T, H D]` and k and v `[B, T, KV D]` of `heads` = H and
/// `kvHeads` = KV heads, KV dividing H, and the `[B, T, H D]` result: the
/// separate form of tp.attention. Returns D.
static FailureOr<int64_t> verifySeparateQkv(Operation *op,
                                            RankedTensorType q,
                                            RankedTensorType k,
                                            RankedTensorType v, int64_t heads,
                                            int64_t kvHeads,
                                            RankedTensorType result) {
  if (q.getRank() != 3)
    return op->emitOpError("q must be [batch, seq, heads * head width], got ")
           << shapeString(q.getShape());
  if (heads % kvHeads != 0)
    return op->emitOpError("kv_heads ")
           << kvHeads << " does not divide num_heads " << heads;
  if (q.getDimSize(2) % heads != 0)
    return op->emitOpError("num_heads ")
           << heads << " does not divide the query width " << q.getDimSize(2);
  int64_t width = q.getDimSize(2) / heads;
  SmallVector<int64_t> kvShape = {q.getDimSize(0), q.getDimSize(1),
                                  kvHeads * width};
  if (failed(expectSameElementType(op, q, k, "k")) ||
      failed(expectSameElementType(op, q, v, "v")) ||
      failed(expectShape(op, "k", k.getShape(), kvShape)) ||
      failed(expectShape(op, "v", v.getShape(), kvShape)) ||
      failed(expectSameElementType(op, q, result, "result")) ||
      failed(expectShape(op, "result", result.getShape(),
                         {q.getDimSize(0), q.getDimSize(1), heads * width})))
    return failure();
  return width;
}

/// tp.attention's inputs and result, in either form; `result` is the
/// attention (the gradient's `grad`).
static LogicalResult verifyAttentionInputs(Operation *op, ValueRange inputs,
                                           int64_t heads,
                                           std::optional<int64_t> kvHeads,
                                           RankedTensorType result) {
  auto typeOf = [&](unsigned i) {
    return cast<RankedTensorType>(inputs[i].getType());
  };
  if (inputs.size() == 1) {
    if (kvHeads)
      return op->emitOpError("kv_heads belongs to separate q, k and v; a "
                             "fused qkv has num_heads heads of each");
    return verifyFusedQkv(op, typeOf(0), heads, result);
  }
  if (inputs.size() != 3)
    return op->emitOpError("takes a fused qkv or q, k and v, got ")
           << inputs.size() << " inputs";
  return verifySeparateQkv(op, typeOf(0), typeOf(1), typeOf(2), heads,
                           kvHeads.value_or(heads), result);
}

/// Where a DropoutOpInterface op's elements sit: no offsets (the whole
/// tensor), or one per dimension of `local` with the global shape, which
/// holds the local one.
static LogicalResult verifyDropoutPlacement(Operation *op,
                                            ArrayRef<int64_t> local,
                                            ValueRange offsets,
                                            std::optional<ArrayRef<int64_t>> global) {
  if (offsets.empty() != !global)
    return op->emitOpError("takes offsets and a global shape together");
  if (!global)
    return success();
  if (offsets.size() != local.size() || global->size() != local.size())
    return op->emitOpError("places its ")
           << local.size() << " dimensions with " << offsets.size()
           << " offsets in a global shape of " << global->size();
  for (auto [dim, size] : llvm::enumerate(local))
    if (size > (*global)[dim])
      return op->emitOpError("holds ")
             << size << " elements of dimension " << dim
             << ", more than the global shape's " << (*global)[dim];
  return success();
}

/// Attention's dropout arguments: a rate comes with its stream, and the
/// placement is of the probabilities' [batch, heads].
template <typename AttentionLikeOp>
static LogicalResult verifyProbabilityDropout(AttentionLikeOp op,
                                              int64_t batch) {
  if (op.getDropout().has_value() != static_cast<bool>(op.getStream()))
    return op.emitOpError("takes a dropout rate and its stream together");
  if (!op.getDropout() && (op.getKey() || !op.getOffsets().empty()))
    return op.emitOpError("has dropout arguments but no dropout rate");
  return verifyDropoutPlacement(op, {batch, static_cast<int64_t>(op.getNumHeads())},
                                op.getOffsets(), op.getGlobalShape());
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionInputs(*this, getInputs(), getNumHeads(),
                                   getKvHeads(), getType())))
    return failure();
  return verifyProbabilityDropout(*this, getType().getDimSize(0));
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionInputs(*this, getInputs(), getNumHeads(),
                                   getKvHeads(), getGrad().getType())) ||
      failed(verifyProbabilityDropout(*this,
                                      getGrad().getType().getDimSize(0))))
    return failure();
  if (getInputGrads().getTypes() != getInputs().getTypes())
    return emitOpError("input_grads must have the inputs' types");
  return success();
}

/// A KV cache [L, B, heads, N, width] for a chunk of [batch, chunk] tokens
/// of `element` values at `positions`, its layer `layer`: what
/// tp.kv_cache_store and tp.cached_attention take.
static LogicalResult verifyKVCache(Operation *op, RankedTensorType chunkType,
                                   int64_t heads, int64_t width,
                                   Type cacheType, int64_t layer,
                                   RankedTensorType positions) {
  auto cache = cast<RankedTensorType>(cacheType);
  if (cache.getRank() != 5)
    return op->emitOpError("the caches must be [layers, batch, heads, "
                           "context, head width], got rank ")
           << cache.getRank();
  int64_t batch = chunkType.getDimSize(0), chunk = chunkType.getDimSize(1);
  if (layer >= cache.getDimSize(0))
    return op->emitOpError("layer ") << layer << " is beyond the caches' "
                                     << cache.getDimSize(0) << " layers";
  if (cache.getDimSize(3) < chunk)
    return op->emitOpError("the chunk of ")
           << chunk << " tokens does not fit the caches' context of "
           << cache.getDimSize(3);
  if (failed(expectSameElementType(op, chunkType, cache, "the caches")) ||
      failed(expectShape(op, "the caches' [batch, heads, head width]",
                         {cache.getDimSize(1), cache.getDimSize(2),
                          cache.getDimSize(4)},
                         {batch, heads, width})))
    return failure();
  return expectPerSequence(op, "positions", positions, batch);
}

LogicalResult KVCacheStoreOp::verify() {
  auto input = getInput().getType();
  int64_t heads = getNumHeads();
  if (getSection()) {
    if (failed(verifyFusedQkv(*this, input, heads,
                              input.clone({input.getDimSize(0),
                                           input.getDimSize(1),
                                           input.getDimSize(2) / 3}))))
      return failure();
  } else if (input.getRank() != 3 || input.getDimSize(2) % heads != 0) {
    return emitOpError("without a section the input must be [batch, seq, ")
           << heads << " heads * head width], got "
           << shapeString(input.getShape());
  }
  int64_t width = input.getDimSize(2) / (getSection() ? 3 : 1) / heads;
  return verifyKVCache(*this, input, heads, width, getCache().getType(),
                       getLayer(), getPositions().getType());
}

LogicalResult CachedAttentionOp::verify() {
  auto queries = getQueries().getType();
  int64_t heads = getNumHeads();
  FailureOr<int64_t> width = failure();
  if (!getKvHeads()) {
    if (failed(verifyFusedQkv(*this, queries, heads, getType())))
      return failure();
    width = queries.getDimSize(2) / 3 / heads;
  } else {
    // The queries alone: their keys and values are the caches'.
    auto kvType = queries.clone(
        {queries.getDimSize(0), queries.getDimSize(1),
         queries.getDimSize(2) / heads * getKeyValueHeads()});
    width = verifySeparateQkv(*this, queries, kvType, kvType, heads,
                              getKeyValueHeads(), getType());
    if (failed(width))
      return failure();
  }
  return verifyKVCache(*this, queries, getKeyValueHeads(), *width,
                       getKCache().getType(), getLayer(),
                       getPositions().getType());
}

LogicalResult RoPEOp::verify() {
  auto input = getInput().getType();
  if (input.getRank() != 3)
    return emitOpError("input must be [batch, seq, heads * head width], got ")
           << shapeString(input.getShape());
  int64_t width = input.getDimSize(2), heads = getNumHeads();
  if (width % heads != 0)
    return emitOpError("") << heads << " heads do not divide the width "
                           << width;
  if ((width / heads) % 2 != 0)
    return emitOpError("rotary embeddings pair the halves of each head: the "
                       "head width ")
           << width / heads << " is odd";
  if (!(getTheta().convertToDouble() > 0.0))
    return emitOpError("theta must be positive, got ")
           << getTheta().convertToDouble();
  if (!getPositions())
    return success();
  return expectPerSequence(*this, "positions", getPositions().getType(),
                           input.getDimSize(0));
}

LogicalResult PositionEmbeddingAtOp::verify() {
  auto table = getTable().getType();
  auto result = getType();
  if (table.getRank() != 2 || result.getRank() != 3)
    return emitOpError("table must be [positions, width] and the result "
                       "[batch, chunk, width]");
  if (result.getDimSize(1) > table.getDimSize(0))
    return emitOpError("a chunk of ")
           << result.getDimSize(1) << " positions does not fit the table's "
           << table.getDimSize(0);
  if (failed(expectSameElementType(*this, table, result, "result")) ||
      failed(expectShape(*this, "result width", result.getDimSize(2),
                         table.getDimSize(1))))
    return failure();
  return expectPerSequence(*this, "positions", getPositions().getType(),
                           result.getDimSize(0));
}

LogicalResult TakePositionOp::verify() {
  auto input = getInput().getType();
  if (input.getRank() != 3)
    return emitOpError("input must be [batch, chunk, width], got rank ")
           << input.getRank();
  if (failed(expectSameElementType(*this, input, getType(), "result")) ||
      failed(expectShape(*this, "result", getType().getShape(),
                         {input.getDimSize(0), input.getDimSize(2)})))
    return failure();
  return expectPerSequence(*this, "index", getIndex().getType(),
                           input.getDimSize(0));
}

LogicalResult SoftmaxOp::verify() {
  if (!isValidDim(getDim(), getType().getRank()))
    return emitOpError("dim ") << getDim() << " is out of range for rank "
                               << getType().getRank();
  return success();
}

/// `tokens` holds one value per token of `logits` ([..., V] -> [...]).
static LogicalResult expectPerToken(Operation *op, StringRef what,
                                    RankedTensorType tokens,
                                    RankedTensorType logits) {
  if (logits.getRank() < 2)
    return op->emitOpError(
        "logits must be [..., vocab] with at least one token dimension");
  return expectShape(op, what, tokens.getShape(), logits.getShape().drop_back());
}

LogicalResult XentMaxOp::verify() {
  return expectPerToken(*this, "max", getType(), getLogits().getType());
}

LogicalResult XentSumExpOp::verify() {
  auto logits = getLogits().getType();
  if (failed(expectPerToken(*this, "max", getMax().getType(), logits)))
    return failure();
  return expectPerToken(*this, "targets", getTargets().getType(), logits);
}

LogicalResult CrossEntropyOp::verify() {
  auto logits = getLogits().getType();
  if (failed(expectPerToken(*this, "targets", getTargets().getType(), logits)))
    return failure();
  int64_t vocab = logits.getShape().back();
  if (static_cast<int64_t>(getValidVocab()) > vocab)
    return emitOpError("valid_vocab ")
           << getValidVocab() << " exceeds the " << vocab << " logits";
  return expectAtLeastAsWide(*this, logits, getType(), "loss");
}

LogicalResult LayerNormGradOp::verify() {
  return expectAtLeastAsWide(*this, getWeight().getType(),
                             getWeightGrad().getType(), "weight_grad");
}

LogicalResult RMSNormGradOp::verify() {
  return expectAtLeastAsWide(*this, getWeight().getType(),
                             getWeightGrad().getType(), "weight_grad");
}

LogicalResult WeightGradOp::verify() {
  ArrayRef<int64_t> lhs = getLhs().getType().getShape();
  ArrayRef<int64_t> rhs = getRhs().getType().getShape();
  if (lhs.empty() || rhs.empty() || lhs.drop_back() != rhs.drop_back())
    return emitOpError("operands must share their leading dimensions, got ")
           << shapeString(lhs) << " and " << shapeString(rhs);
  return expectShape(*this, "result", getType().getShape(),
                     {lhs.back(), rhs.back()});
}

LogicalResult SumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  return success();
}

LogicalResult SumToOp::verify() {
  ArrayRef<int64_t> input = getInput().getType().getShape();
  ArrayRef<int64_t> result = getType().getShape();
  if (result.size() > input.size() || input.take_back(result.size()) != result)
    return emitOpError("result shape ")
           << shapeString(result) << " is not a suffix of the input shape "
           << shapeString(input);
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

FailureOr<int64_t>
mlir::tp::verifyMeshAxis(Operation *op, FlatSymbolRefAttr mesh, StringRef axis,
                         SymbolTableCollection &symbolTable) {
  auto meshOp = symbolTable.lookupNearestSymbolFrom<MeshOp>(op, mesh);
  if (!meshOp)
    return op->emitOpError("refers to unknown mesh ") << mesh;
  std::optional<int64_t> size = meshOp.getAxisSize(axis);
  if (!size)
    return op->emitOpError("mesh ")
           << mesh << " has no axis \"" << axis << "\"";
  return *size;
}

LogicalResult tp::verifyShardingForType(Operation *anchor,
                                        ShardingAttr sharding, Type type,
                                        SymbolTableCollection &symbolTable) {
  auto meshOp = symbolTable.lookupNearestSymbolFrom<MeshOp>(
      anchor, sharding.getMesh());
  if (!meshOp)
    return anchor->emitOpError()
           << "sharding refers to unknown mesh " << sharding.getMesh();
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return anchor->emitOpError()
           << "sharding needs a statically shaped tensor, got " << type;
  if (sharding.getDims().size() != static_cast<size_t>(tensor.getRank()))
    return anchor->emitOpError()
           << "sharding has " << sharding.getDims().size()
           << " dimension entries for a tensor of rank " << tensor.getRank();
  SmallVector<StringRef> used;
  for (StringRef axis : sharding.getPartialAxes()) {
    if (!meshOp.getAxisSize(axis))
      return anchor->emitOpError() << "mesh " << sharding.getMesh()
                                   << " has no axis \"" << axis << "\"";
    used.push_back(axis);
  }
  for (int64_t dim = 0, e = tensor.getRank(); dim < e; ++dim)
    llvm::append_range(used, sharding.getDimAxes(dim));
  llvm::StringSet<> seen;
  for (StringRef axis : meshOp.expandAxes(used))
    if (!seen.insert(axis).second)
      return anchor->emitOpError()
             << "sharding uses \"" << axis
             << "\" twice, as a sub-axis and through its axis";
  for (int64_t dim = 0, e = tensor.getRank(); dim < e; ++dim) {
    int64_t shards = 1;
    // A count past 64 bits splits no dimension (and must not wrap into one
    // that divides it).
    bool tooMany = false;
    for (StringRef axis : sharding.getDimAxes(dim)) {
      std::optional<int64_t> size = meshOp.getAxisSize(axis);
      if (!size)
        return anchor->emitOpError() << "mesh " << sharding.getMesh()
                                     << " has no axis \"" << axis << "\"";
      tooMany |= __builtin_mul_overflow(shards, *size, &shards);
    }
    int64_t sections = sharding.getDimSections(dim), parts = 0;
    tooMany |= __builtin_mul_overflow(shards, sections, &parts);
    if (tooMany || tensor.getDimSize(dim) % parts != 0)
      return anchor->emitOpError()
             << "dimension " << dim << " of size " << tensor.getDimSize(dim)
             << " cannot be split into " << shards << " shards"
             << (sections > 1 ? " of each of " + std::to_string(sections) +
                                    " sections"
                              : std::string());
  }
  return success();
}

SmallVector<int64_t> tp::getLocalShape(ArrayRef<int64_t> globalShape,
                                       ShardingAttr sharding, MeshOp mesh) {
  SmallVector<int64_t> local(globalShape);
  for (auto [dim, size] : llvm::enumerate(local))
    for (StringRef axis : sharding.getDimAxes(dim))
      size /= *mesh.getAxisSize(axis);
  return local;
}

/// all_gather grows `dim` by the size of its mesh axis; reduce_scatter and
/// local_slice shrink it. `wide` is the larger of the two types.
template <typename CollectiveOp>
static LogicalResult verifySplitDim(CollectiveOp op,
                                    SymbolTableCollection &symbolTable,
                                    RankedTensorType wide,
                                    RankedTensorType narrow) {
  FailureOr<int64_t> size =
      verifyMeshAxis(op, op.getMeshAttr(), op.getAxis(), symbolTable);
  if (failed(size))
    return failure();
  int64_t axisSize = *size;
  int64_t dim = op.getDim();
  if (!isValidDim(dim, wide.getRank()) || wide.getRank() != narrow.getRank())
    return op.emitOpError("dim ")
           << dim << " is out of range, or input and result ranks differ";
  if (wide.getDimSize(dim) % axisSize != 0)
    return op.emitOpError("dimension ")
           << dim << " of size " << wide.getDimSize(dim)
           << " cannot be split into " << axisSize << " shards";
  SmallVector<int64_t> expected(wide.getShape());
  expected[dim] /= axisSize;
  if (failed(expectSameElementType(op, wide, narrow, "result")))
    return failure();
  return expectShape(op, "local side", narrow.getShape(), expected);
}

/// A bucket, or a started all-reduce, sums at least one tensor.
static LogicalResult verifyHasTensors(Operation *op, ValueRange inputs) {
  if (inputs.empty())
    return op->emitOpError("needs at least one tensor");
  return success();
}

LogicalResult AllReduceBucketOp::verify() {
  return verifyHasTensors(*this, getInputs());
}

/// Each result has its input's type.
LogicalResult AllReduceBucketOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &results) {
  llvm::append_range(results, operands.getTypes());
  return success();
}

/// A start has one wait, which completes it.
static LogicalResult verifyStart(Operation *op, ValueRange inputs,
                                 Value pending) {
  if (failed(verifyHasTensors(op, inputs)))
    return failure();
  if (!pending.hasOneUse() || !isa<WaitOp>(*pending.user_begin()))
    return op->emitOpError("needs exactly one tp.wait");
  return success();
}

/// Its wait gives the sums, each of its input's type.
LogicalResult AllReduceStartOp::verify() {
  if (failed(verifyStart(*this, getInputs(), getPending())))
    return failure();
  Operation *wait = getWait();
  if (wait->getResultTypes() != getInputs().getTypes())
    return wait->emitOpError(
        "results must have the types of the start's inputs");
  return success();
}

StartOpInterface WaitOp::getStart() {
  return getPending().getDefiningOp<StartOpInterface>();
}

/// After its start in its block: a wait elsewhere could run before its
/// start or in a region whose runs do not match the start's. The start
/// checks the types.
LogicalResult WaitOp::verify() {
  StartOpInterface start = getStart();
  if (!start)
    return emitOpError("waits for a value no started collective defined");
  if (start->getBlock() != (*this)->getBlock() ||
      !start->isBeforeInBlock(*this))
    return emitOpError("must follow its start in the same block");
  return success();
}

/// Each of `results` is this rank's rows of the matching input: its
/// dimension 0 split over the `ranks` ranks of the axis. Errors go to `at`.
static LogicalResult verifyRowsPerRank(Operation *at, TypeRange inputs,
                                       TypeRange results, int64_t ranks) {
  if (inputs.size() != results.size())
    return at->emitOpError("has ")
           << results.size() << " results for " << inputs.size() << " inputs";
  for (auto [index, input, result] : llvm::enumerate(inputs, results)) {
    auto wide = cast<RankedTensorType>(input);
    if (wide.getRank() == 0 || wide.getDimSize(0) % ranks != 0)
      return at->emitOpError("cannot split the rows of input ")
             << index << ", of type " << wide << ", over the " << ranks
             << " ranks of its axis";
    SmallVector<int64_t> shape(wide.getShape());
    shape[0] /= ranks;
    if (result != wide.clone(shape))
      return at->emitOpError("result ")
             << index << " must be " << wide.clone(shape)
             << ", this rank's rows of input " << index;
  }
  return success();
}

LogicalResult ReduceScatterBucketOp::verify() {
  return verifyHasTensors(*this, getInputs());
}

LogicalResult
ReduceScatterBucketOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<int64_t> ranks =
      verifyMeshAxis(*this, getMeshAttr(), getAxis(), symbolTable);
  if (failed(ranks))
    return failure();
  return verifyRowsPerRank(*this, getInputs().getTypes(), getResultTypes(),
                           *ranks);
}

LogicalResult ReduceScatterStartOp::verify() {
  return verifyStart(*this, getInputs(), getPending());
}

/// Its wait gives this rank's rows of the sums; how many rows that is
/// depends on the mesh.
LogicalResult
ReduceScatterStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<int64_t> ranks =
      verifyMeshAxis(*this, getMeshAttr(), getAxis(), symbolTable);
  if (failed(ranks))
    return failure();
  Operation *wait = getWait();
  return verifyRowsPerRank(wait, getInputs().getTypes(),
                           wait->getResultTypes(), *ranks);
}

LogicalResult AllGatherStartOp::verify() {
  return verifyStart(*this, getInputs(), getPending());
}

/// Its wait gives the whole tensors whose rows its inputs are.
LogicalResult
AllGatherStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<int64_t> ranks =
      verifyMeshAxis(*this, getMeshAttr(), getAxis(), symbolTable);
  if (failed(ranks))
    return failure();
  Operation *wait = getWait();
  if (wait->getNumResults() != getInputs().size())
    return wait->emitOpError("has ")
           << wait->getNumResults() << " results for " << getInputs().size()
           << " inputs";
  for (auto [index, input, result] :
       llvm::enumerate(getInputs().getTypes(), wait->getResultTypes())) {
    auto rows = cast<RankedTensorType>(input);
    if (rows.getRank() == 0)
      return emitOpError("input ") << index << " is 0-d: it has no rows";
    SmallVector<int64_t> shape(rows.getShape());
    shape[0] *= *ranks;
    if (result != rows.clone(shape))
      return wait->emitOpError("result ")
             << index << " must be " << rows.clone(shape) << ", the "
             << *ranks << " ranks' rows of input " << index;
  }
  return success();
}

LogicalResult
AllGatherOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifySplitDim(*this, symbolTable, getType(), getInput().getType());
}

LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifySplitDim(*this, symbolTable, getInput().getType(), getType());
}

LogicalResult
LocalSliceOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifySplitDim(*this, symbolTable, getInput().getType(), getType());
}

LogicalResult
SPGatherOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifySplitDim(*this, symbolTable, getType(), getInput().getType());
}

//===----------------------------------------------------------------------===//
// Canonicalization: sequence parallelism's collectives
//===----------------------------------------------------------------------===//

namespace {

/// Leaving a tensor-parallel region into a sequence-split one: this rank's
/// chunk of a g's complete sum is a reduce-scatter, half of what the
/// all-reduce moves. The gradient agrees: g passes it through and the
/// chunk's is the all-gather that is the reduce-scatter's.
struct ScatterCompletedSum : OpRewritePattern<LocalSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LocalSliceOp slice,
                                PatternRewriter &rewriter) const override {
    auto sum = slice.getInput().getDefiningOp<GOp>();
    if (!sum || !sum->hasOneUse() || sum.getMeshAttr() != slice.getMeshAttr() ||
        sum.getAxis() != slice.getAxis())
      return failure();
    rewriter.replaceOpWithNewOp<ReduceScatterOp>(
        slice, slice.getType(), sum.getInput(),
        ReductionKindAttr::get(getContext(), ReductionKind::sum),
        slice.getMeshAttr(), slice.getAxisAttr(), slice.getDimAttr());
    rewriter.eraseOp(sum);
    return success();
  }
};

/// Entering a tensor-parallel region from a sequence-split one: an f of a
/// gather that only it reads is one tp.sp_gather, whose gradient
/// reduce-scatters what the f would all-reduce and the gather slice.
struct GatherIntoRegion : OpRewritePattern<FOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FOp f,
                                PatternRewriter &rewriter) const override {
    auto gather = f.getInput().getDefiningOp<AllGatherOp>();
    if (!gather || !gather->hasOneUse() ||
        gather.getMeshAttr() != f.getMeshAttr() ||
        gather.getAxis() != f.getAxis())
      return failure();
    rewriter.replaceOpWithNewOp<SPGatherOp>(
        f, f.getType(), gather.getInput(), gather.getMeshAttr(),
        gather.getAxisAttr(), gather.getDimAttr());
    rewriter.eraseOp(gather);
    return success();
  }
};

} // namespace

void LocalSliceOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                               MLIRContext *context) {
  patterns.add<ScatterCompletedSum>(context);
}

void FOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                      MLIRContext *context) {
  patterns.add<GatherIntoRegion>(context);
}

#define GET_OP_CLASSES
#include "megatron/Dialect/TP/IR/TPOps.cpp.inc"

LogicalResult DropoutOp::verify() {
  int64_t rank = getType().getRank();
  if (rank < 1 || rank > 3)
    return emitOpError("drops elements of tensors of rank 1 to 3, got rank ")
           << rank;
  return verifyDropoutPlacement(*this, getType().getShape(), getOffsets(),
                                getGlobalShape());
}

bool DropoutOp::hasDropout() { return !getDropout().isZero(); }
bool AttentionOp::hasDropout() {
  return getDropout() && !getDropout()->isZero();
}
bool AttentionGradOp::hasDropout() {
  return getDropout() && !getDropout()->isZero();
}

/// Without the step's key (evaluation) or at rate 0 nothing is dropped.
OpFoldResult DropoutOp::fold(FoldAdaptor) {
  if (!getKey() || !hasDropout())
    return getInput();
  return {};
}
