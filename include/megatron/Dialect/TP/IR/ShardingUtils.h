//===- ShardingUtils.h - reading and building shardings per factor -*- C++ -*-===//
//
// The one place that maps between tensor shardings and an op's factors:
// sharding propagation uses it to infer unknown shardings, conjugate
// insertion to compute what each operand must look like.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_DIALECT_TP_IR_SHARDINGUTILS_H
#define MEGATRON_DIALECT_TP_IR_SHARDINGUTILS_H

#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/IR/Builders.h"

namespace mlir::tp {

/// The sharding of `value`: the tp.sharding of its defining single-result
/// op, or of the function argument it is; null when it has none.
ShardingAttr getSharding(Value value);
void setSharding(Value value, ShardingAttr sharding);

/// A value of `type`, replicated on `mesh`.
ShardingAttr getReplicated(FlatSymbolRefAttr mesh, Type type);

/// The same sharding without pending partial sums.
ShardingAttr withoutPartial(ShardingAttr sharding);

/// Whether two shardings lay the data out alike on `mesh`: same split of
/// every dimension and same pending sums, ignoring axes of size 1 and how
/// sub-axes spell a split.
bool sameLayout(ShardingAttr a, ShardingAttr b, MeshOp mesh);

/// How each factor of an op is split, gathered from the op's tensors.
class FactorShardings {
public:
  struct Factor {
    bool known = false;
    /// Set by a user annotation: propagation may not change it.
    bool fixed = false;
    /// Read from a result: what the op's users want, which a g or reshard
    /// after the op can give them.
    bool fromResult = false;
    SmallVector<StringRef, 1> axes;
    int64_t sections = 1;
  };
  /// Two shardings of one factor disagreed; `kept` won.
  struct Conflict {
    int64_t factor;
    Factor kept, dropped;
  };

  /// `mesh` spells splits over sub-axes (null: a mesh without them).
  FactorShardings(const ShardingRule &rule, MeshOp mesh)
      : rule(rule), meshOp(mesh), factors(rule.isReduction.size()) {}

  /// Reads `sharding` of a tensor indexed by `dims`. Partial axes of a result
  /// belong to its reduction factor. A split of a dimension that must stay
  /// whole, or in sections the op does not expect, says nothing about the
  /// factors: the tensor is resharded to what they give.
  void merge(const ShardingRule::TensorDims &dims, ShardingAttr sharding,
             bool fixed, bool isResult);

  /// The sharding of a tensor indexed by `dims`; results are partial over
  /// the axes of split reduction factors unless the op absorbs them.
  ShardingAttr build(FlatSymbolRefAttr mesh,
                     const ShardingRule::TensorDims &dims,
                     bool isResult) const;

  /// Whether every factor that lays out a tensor indexed by `dims` is known
  /// (for a result also each reduction factor that would leave it partial):
  /// build() then says all of its layout rather than taking the unknown
  /// factors as unsplit.
  bool determines(const ShardingRule::TensorDims &dims, bool isResult) const;

  ArrayRef<Conflict> getConflicts() const { return conflicts; }
  bool hasFixedConflict() const { return fixedConflict; }

private:
  /// Merges one tensor's split of factor `index`. An axis splits one factor
  /// of an op: where another factor holds an axis the split claims, the
  /// stronger claim takes it and the other factor becomes unsplit, its
  /// tensors resharded. An annotated operand is strongest, then an
  /// annotated result (its users get it after the op), then what was
  /// inferred; between equals the earlier stays, and two annotations of
  /// one kind conflict. Sequence parallelism's sequence, split over tp
  /// between the tensor-parallel regions, so meets a GEMM whose columns are
  /// split over tp: the activation is gathered.
  void mergeFactor(int64_t index, Factor incoming);
  /// The split of one factor from one tensor against what is known of it.
  void mergeSplit(int64_t index, Factor incoming);
  bool shareAxis(const Factor &a, const Factor &b) const;
  /// How many pieces `factor`'s split makes (without a mesh, each axis
  /// counts as splitting).
  int64_t shardCount(const Factor &factor) const;
  /// The dimension's split given to its major and minor factors.
  void mergeCompound(const ShardingRule::Dim &dim, ArrayRef<StringRef> axes,
                     bool fixed, bool isResult);

  const ShardingRule &rule;
  /// Op handles are not const-correct; reading the mesh changes nothing.
  mutable MeshOp meshOp;
  SmallVector<Factor> factors;
  SmallVector<Conflict> conflicts;
  bool fixedConflict = false;
};

/// What an op's ShardingRuleOpInterface::partition works with: the global
/// shardings tp-partition read before types became local, the mesh, and a
/// builder.
class PartitionContext {
public:
  PartitionContext(MeshOp mesh, DenseMap<Value, ShardingAttr> shardings)
      : mesh(mesh), meshRef(FlatSymbolRefAttr::get(mesh)),
        shardings(std::move(shardings)), builder(mesh.getContext()) {}

  /// The global sharding of `value`; null when it had none.
  ShardingAttr shardingOf(Value value) const {
    return shardings.lookup(value);
  }
  MeshOp getMesh() { return mesh; }
  FlatSymbolRefAttr getMeshRef() const { return meshRef; }
  OpBuilder &getBuilder() { return builder; }

  /// The mesh axis dimension `dim` is split over, if it really splits (an
  /// axis of size 1 does not).
  std::optional<StringRef> splitAxis(ShardingAttr sharding, unsigned dim);
  /// Into how many shards `sharding` splits dimension `dim`.
  int64_t shardCount(ShardingAttr sharding, unsigned dim);
  /// This rank's first row of a tensor whose dimension of `localSize` rows
  /// is split over `axis`: axis_index * localSize, at the insertion point.
  Value rowOffset(Location loc, StringRef axis, int64_t localSize);
  /// This rank's first index along dimension `dim` of a tensor `sharding`
  /// splits into parts of `localSize`: its position among the dimension's
  /// splitting axes (major to minor) times localSize; 0 where it is whole.
  /// Computed once per function, at the start of `user`'s, outside every
  /// layer: the layers' ops read one value (and stay one body,
  /// tp-outline-layers).
  Value dimOffset(Operation *user, ShardingAttr sharding, unsigned dim,
                  int64_t localSize);

  /// Replaces `op`'s one result with `replacement`, which takes over its
  /// sharding, and erases `op`. Ops that partition into others go through
  /// here, so that no sharding stays recorded for a value that no longer
  /// exists (a new value could reuse its address).
  void replaceOp(Operation *op, Value replacement);

private:
  /// The rank's position among `axes` (major to minor) times localSize, at
  /// the insertion point; 0 for no axes.
  Value offsetAlong(Location loc, ArrayRef<StringRef> axes,
                    int64_t localSize);

  MeshOp mesh;
  FlatSymbolRefAttr meshRef;
  DenseMap<Value, ShardingAttr> shardings;
  OpBuilder builder;
  /// dimOffset's values, by the dimension's splitting axes and local size.
  DenseMap<std::pair<Attribute, int64_t>, Value> offsets;
};

/// Human-readable form of a factor's split, e.g. `["tp"]` or `[]`.
std::string describeAxes(ArrayRef<StringRef> axes);

/// The axes among `axes` that split (size > 1), each factored axis as its
/// sub-axes: the form in which two splits compare and subtract.
SmallVector<StringRef> splittingSubAxes(ArrayRef<StringRef> axes, MeshOp mesh);

} // namespace mlir::tp

#endif // MEGATRON_DIALECT_TP_IR_SHARDINGUTILS_H
