//===- ShardingRule.h - how an op's dimensions may be split -----*- C++ -*-===//
//
// A sharding rule names the independent "factors" of an op's iteration space
// (Shardy's formulation) and, for every dimension of every operand and
// result, the factor that indexes it. Splitting a factor over a mesh axis
// splits every dimension it indexes; splitting a reduction factor (a
// contracted dimension) leaves the results as partial sums over that axis.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_DIALECT_TP_INTERFACES_SHARDINGRULE_H
#define MEGATRON_DIALECT_TP_INTERFACES_SHARDINGRULE_H

#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mlir::tp {

struct ShardingRule {
  /// A dimension that must stay whole on every rank (a normalised or
  /// attended-over dimension).
  static constexpr int64_t kWhole = -1;

  struct Dim {
    int64_t factor = kWhole;
    /// The dimension holds this many sections of the factor, each split
    /// separately (the fused [q|k|v] dimension of attention holds 3).
    int64_t sections = 1;
    /// A second factor inside `factor`: the dimension is `factor` (of size
    /// `majorSize`) times `minor` (grouped-query attention's query heads:
    /// the key/value head, then the query head inside its group). The
    /// dimension's axes go to the major factor while they divide its size,
    /// the rest to the minor one.
    int64_t minor = kWhole;
    int64_t majorSize = 1;
  };
  using TensorDims = llvm::SmallVector<Dim, 4>;

  llvm::SmallVector<bool, 4> isReduction;
  /// A reduction factor whose partial sums the op combines itself (the
  /// vocabulary of the vocabulary-parallel cross-entropy): splitting it
  /// leaves the results complete.
  llvm::SmallVector<bool, 4> isAbsorbed;
  llvm::SmallVector<TensorDims, 3> operands;
  llvm::SmallVector<TensorDims, 1> results;
  /// The op turns partial operands into a complete result (tp.g).
  bool consumesPartial = false;

  int64_t addFactor(bool reduction = false, bool absorbed = false) {
    isReduction.push_back(reduction);
    isAbsorbed.push_back(absorbed);
    return isReduction.size() - 1;
  }
  /// Whether splitting factor `index` leaves the results partial sums.
  bool leavesPartial(int64_t index) const {
    return isReduction[index] && !isAbsorbed[index];
  }
  /// One factor per dimension of a rank-`rank` tensor.
  TensorDims addFactors(int64_t rank) {
    TensorDims dims;
    for (int64_t i = 0; i < rank; ++i)
      dims.push_back({addFactor(), 1});
    return dims;
  }
  /// `numOperands` operands and one result, all indexed alike.
  static ShardingRule elementwise(unsigned numOperands, int64_t rank) {
    ShardingRule rule;
    TensorDims dims = rule.addFactors(rank);
    rule.operands.assign(numOperands, dims);
    rule.results.push_back(dims);
    return rule;
  }
};

} // namespace mlir::tp

#endif // MEGATRON_DIALECT_TP_INTERFACES_SHARDINGRULE_H
