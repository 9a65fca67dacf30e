// The tensor-parallel slicing rule, in one place.
//
// A dimension of global size G split over an axis of N ranks with S sections
// is S consecutive sections of G/S elements; each section is cut into N chunks
// of G/(S*N); rank r's local dimension is the concatenation over s of the
// global index ranges [s*G/S + r*G/(S*N), + G/(S*N)).
#ifndef MEGATRON_RUN_SLICING_H
#define MEGATRON_RUN_SLICING_H

#include <cstdint>
#include <functional>
#include <vector>

namespace mrun {

// The number of elements of a tensor of shape `shape` (1 for a scalar).
int64_t numElements(const std::vector<int64_t> &shape);

// Local indices [local, local + length) hold global indices
// [global, global + length).
struct Interval {
  int64_t local;
  int64_t global;
  int64_t length;
  bool operator==(const Interval &o) const {
    return local == o.local && global == o.global && length == o.length;
  }
};

// Rank `rank`'s intervals along one dimension (S intervals of G/(S*N), in
// local order). Throws std::invalid_argument unless N, S >= 1, 0 <= rank < N
// and G is a multiple of S*N.
std::vector<Interval> sliceDim(int64_t global, int64_t parts, int64_t sections,
                               int64_t rank);

// Rank `rank`'s share of a dimension already split into `outer` (a split
// nested inside another, such as ZeRO-1's dp rows of a tp slice): the local
// range [rank*L/N, (rank+1)*L/N) of the L elements `outer` holds, as
// intervals in local order. Throws std::invalid_argument unless N >= 1,
// 0 <= rank < N and N divides L.
std::vector<Interval> nestSlice(const std::vector<Interval> &outer,
                                int64_t parts, int64_t rank);

// The global index of local index `local` (same preconditions).
int64_t localToGlobal(int64_t local, int64_t global, int64_t parts,
                      int64_t sections, int64_t rank);

// A rank's view of one tensor: per dimension its intervals (an unsplit
// dimension is the single interval {0, 0, G}), plus the shape of the logical
// (checkpoint) tensor, which may be smaller than the global one: global
// coordinates at or beyond it are padding (zero).
struct TensorSlice {
  std::vector<int64_t> globalShape;
  std::vector<int64_t> checkpointShape;
  std::vector<std::vector<Interval>> dims;
  std::vector<int64_t> localShape() const;
  int64_t localElements() const;
};

// Calls fn(localOffset, checkpointOffset, count) for runs of `count`
// consecutive local elements (row-major flat offsets) that are either
// consecutive elements of the row-major checkpoint tensor starting at
// checkpointOffset, or padding (checkpointOffset == -1). Together the runs
// cover every local element exactly once, in increasing local order.
void forEachRun(const TensorSlice &slice,
                const std::function<void(int64_t, int64_t, int64_t)> &fn);

// Slicing and its inverse, both by forEachRun. `full` is the row-major
// checkpoint tensor (checkpointShape), `local` the rank's buffer (localShape).
// sliceTensor fills every local element (padding 0); unsliceTensor writes the
// checkpoint elements this rank holds (padding is dropped) and leaves the
// others alone, so unslicing every rank's slice rebuilds the whole tensor.
void sliceTensor(const TensorSlice &slice, const float *full, float *local);
// The tokens and targets: ids, sliced alike.
void sliceTensor(const TensorSlice &slice, const int32_t *full,
                 int32_t *local);
void unsliceTensor(const TensorSlice &slice, const float *local, float *full);

} // namespace mrun

#endif // MEGATRON_RUN_SLICING_H
