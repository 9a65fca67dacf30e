// The step.so manifest (mgt_manifest()): parsed and validated.
#ifndef MEGATRON_RUN_MANIFEST_H
#define MEGATRON_RUN_MANIFEST_H

#include "Slicing.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mrun {

struct Split {
  int dim;
  std::string axis; // "tp"
  int64_t sections;
};

struct Arg {
  std::string name;
  std::string role;  // "param", "input_ids", "targets"
  std::string dtype; // "f32" (params), "i32" (input_ids, targets)
  std::vector<int64_t> globalShape, localShape, checkpointShape;
  std::vector<Split> splits;

  int64_t localElements() const;
  size_t elementBytes() const { return 4; }
  // This rank's view of the tensor (tpRank along axis "tp" of size tpSize).
  TensorSlice slice(int64_t tpSize, int64_t tpRank) const;
};

struct Manifest {
  std::string model;
  int64_t tp = 0, batch = 0, seq = 0, validVocab = 0;
  std::vector<Arg> args;
  int inputIds = -1, targets = -1; // indices into args
  // Number of transformer layers: distinct "h.N." prefixes of param names.
  int64_t numLayers() const;
};

// Parses and checks the manifest JSON: format/version, roles, dtypes, shapes
// and that every local_shape follows the slicing rule for the manifest's tp.
// Throws std::runtime_error with a message naming the offending arg.
Manifest parseManifest(const std::string &json);

std::string shapeString(const std::vector<int64_t> &shape);

} // namespace mrun

#endif // MEGATRON_RUN_MANIFEST_H
