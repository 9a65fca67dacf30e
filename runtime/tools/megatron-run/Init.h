// The initialisation the model states for each parameter (its tp.init, the
// manifest's "init": normal(0, std) or a constant), computed per element of
// the GLOBAL (checkpoint) tensor with a counter-based RNG so that every TP
// size gets the same weights and each rank generates only its slice.
//
// For parameter `name`, element i (row-major flat index in checkpoint_shape)
// is one of the two Box-Muller outputs of pair k = i / 2:
//   stream = splitmix64_mix(seed ^ splitmix64_mix(fnv1a64(name)))
//   draw(c) = splitmix64_mix(stream + (c + 1) * 0x9E3779B97F4A7C15)
//   u1 = ((draw(2k) >> 11) + 1) * 2^-53      in (0, 1]
//   u2 = (draw(2k+1) >> 11) * 2^-53          in [0, 1)
//   value = (float)(std * sqrt(-2 ln u1) * (i even ? cos : sin)(2 pi u2))
// (double math, evaluated left to right)
// where splitmix64_mix(z) is splitmix64's output function (the xor-shift-
// multiply finaliser, without the increment).
#ifndef MEGATRON_RUN_INIT_H
#define MEGATRON_RUN_INIT_H

#include "Manifest.h"

#include <cstdint>
#include <string>

namespace mrun {

struct InitRule {
  enum Kind { Normal, Constant } kind;
  double value; // std for Normal, the constant otherwise
};

// The manifest's rule for `arg`. Throws std::runtime_error when the model
// states none.
InitRule initRule(const Arg &arg);

// The value of element `index` (flat, checkpoint layout) of a Normal param.
float normalValue(uint64_t seed, const std::string &name, int64_t index,
                  double stddev);

// Fills this rank's local buffer (padding zero).
void initParam(const Arg &arg, const TensorSlice &slice, uint64_t seed,
               float *out);

} // namespace mrun

#endif // MEGATRON_RUN_INIT_H
