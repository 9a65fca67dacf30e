// A framework's function (a step library built by megatron-compile --entry):
// its global inputs sliced per rank, one call, its outputs gathered and
// written by rank 0.
#ifndef MEGATRON_RUN_FUNCTIONRUN_H
#define MEGATRON_RUN_FUNCTIONRUN_H
#include "Session.h"

namespace mrun {

// Collective: allocates the buffers, reads this rank's slice of every
// "input" arg from --inputs (each a global tensor named as the arg), calls
// the function once and writes every "output" arg's global tensor, in
// manifest order, to --outputs. False on every rank if any rank failed
// (--outputs is then not written).
bool runFunction(Session &s);

} // namespace mrun
#endif // MEGATRON_RUN_FUNCTIONRUN_H
