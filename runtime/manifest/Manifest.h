// The step.so manifest (mgt_manifest()): parsed and validated.
#ifndef MEGATRON_RUN_MANIFEST_H
#define MEGATRON_RUN_MANIFEST_H

#include "CheckpointNames.h"
#include "Slicing.h"

#include "megatron_rt/contract.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mrun {

struct Split {
  int dim;
  std::string axis; // "tp"
  int64_t sections;
  // A sub-axis of tp: `size` ranks `stride` apart (0: the whole axis).
  int64_t stride = 0, size = 0;
};

// The schema is megatron_rt/contract.h's (MGT_FIELD_*, MGT_ROLE_*).
// Roles: "param"; "tokens", "targets" (i32 [batch, seq]); the AdamW state
// "adam_m", "adam_v" and the gradient "grad" of a parameter (f32, sharded like
// it, `param` names it); "master" (f32, the fp32 rows over dp of a param
// stored in bf16, split like its ZeRO-1 AdamW state; its checkpoint tensor is
// the param's); "hyperparameters" (f32 [8], replicated); "logits"
// (f32 [batch, seq, padded vocab], checkpoint_shape [batch, seq, valid_vocab],
// only the vocabulary dim may be split): written by mgt_forward (compiled
// with --export-logits); "input" and "output" (f32, any split): a
// function's arguments "arg<i>" and results "result<i>", in a step whose
// one entry is "function". Generation (entries "prefill" and "decode"):
// "tokens" (the prompt's chunk, i32 [batch, seq]), "next_tokens" (i32
// [batch, 1]), "positions" and "last_index" (i32 [batch]), two "kv_cache"
// (f32 [layers, batch, heads, ctx, head_dim], only the heads split) and
// "logits" (f32 [batch, padded vocab], checkpoint_shape [batch,
// valid_vocab], only the vocabulary split); no "targets".
struct Arg {
  std::string name;
  std::string role;
  std::string dtype; // "i32" for tokens, targets; "bf16" for a param with a
                     // master; "f32" otherwise
  std::vector<int64_t> globalShape, localShape, checkpointShape;
  std::vector<Split> splits;
  std::string param; // adam_m / adam_v / grad / master: the parameter's name
  // role "param": how it is initialised without a checkpoint, as the model
  // states it (hasInit false: the model states none).
  bool hasInit = false;
  bool initNormal = false; // normal(0, initValue), else the constant
  double initValue = 0;
  // Where the step reads it: "host" memory, or "device" memory of the GPU
  // (a CUDA step's buffers, reached through the runtime's copies).
  bool onDevice = false;
  // role "param": indices (into Manifest::args) of its adam_m, adam_v, grad
  // and master args (-1: none); other roles: paramIndex is the index of
  // `param`.
  int adamM = -1, adamV = -1, grad = -1, master = -1, paramIndex = -1;

  int64_t localElements() const;
  size_t elementBytes() const { return dtype == MGT_DTYPE_BF16 ? 2 : 4; }
  // An AdamW moment (role adam_m or adam_v).
  bool isAdamState() const;
  // What ZeRO-1 splits over dp: the AdamW moments and the master weights.
  bool isOptimizerState() const;
  // A function's input or output (role "input" or "output").
  bool isFunctionIO() const;
  // This rank's view of the tensor: tpRank along axis "tp" of size tpSize,
  // dpRank along "dp" (the tokens' and targets' batch, ZeRO-1's AdamW
  // state) of size dpSize.
  TensorSlice slice(int64_t tpSize, int64_t tpRank, int64_t dpSize = 1,
                    int64_t dpRank = 0) const;
};

struct Manifest {
  std::string model;
  std::string target = "cpu"; // "cpu" or "cuda"
  int64_t dp = 1, tp = 0, batch = 0, seq = 0, validVocab = 0;
  std::vector<Arg> args;
  // How the family's checkpoints name tensors ("checkpoint_names"): the
  // scheme's name ("": the model's own names) and its mapping.
  std::string checkpointNamesScheme;
  CheckpointNames checkpointNames = checkpointNamesFor("");
  int tokens = -1, targets = -1; // indices into args
  int hyperparameters = -1;        // index of the "hyperparameters" arg
  int logits = -1;                 // index of the "logits" arg (-1: none)
  // Generation's args (indices, -1: none) and the positions its KV cache
  // holds.
  int nextTokens = -1, positions = -1, lastIndex = -1;
  int64_t ctx = 0;
  // "forward" and maybe "train_step", "function" alone, or "prefill" and
  // "decode".
  std::vector<std::string> entries;
  bool hasEntry(const std::string &e) const;
  bool generates() const { return hasEntry(MGT_ENTRY_KIND_PREFILL); }
  // The FLOPs of one call of an entry on one rank ("flops"; 0 where the
  // manifest gives none).
  std::map<std::string, double> flops;
  double flopsOf(const std::string &entry) const;
  // The narrowest type the step computes in ("compute"): MGT_DTYPE_BF16
  // when its GEMMs take bf16 operands.
  std::string compute = MGT_DTYPE_F32;
  bool computesInBf16() const { return compute == MGT_DTYPE_BF16; }
  // Every param has a "grad" arg (compiled with --export-grads).
  bool hasGrads() const;
  // Args allocated as one buffer each, members in order with no gap
  // ("stacks"): the step loops over a stack's layers from its first
  // member's pointer.
  std::vector<std::vector<int>> stacks;
};

// Parses and checks the manifest JSON: format/version, roles, dtypes, shapes
// and that every local_shape follows the slicing rule for the manifest's tp;
// adam_m / adam_v / grad args must name a param and have its shapes and
// split; grads are given for every param or none; with the "train_step"
// entry every param needs adam_m and adam_v and there must be a
// "hyperparameters" arg; at most one "logits" arg, shaped as above.
// "entries" defaults to ["forward"]. Each of "stacks" lists two or more
// distinct args of equal size and memory, none in another stack.
// Throws std::runtime_error with a message naming the offending arg.
Manifest parseManifest(const std::string &json);

// The manifest JSON of `m`: what the compiler writes (tp-step-manifest fills
// a Manifest and writes it with this) and parseManifest reads back. Only the
// fields the JSON holds are read (not the indices parseManifest derives);
// whole numbers are written as integers.
std::string writeManifest(const Manifest &m);
// What parseManifest throws for `json`, or "": for callers built without
// exceptions (the compiler checks each manifest it writes with it).
std::string manifestError(const std::string &json);

std::string shapeString(const std::vector<int64_t> &shape);

} // namespace mrun

#endif // MEGATRON_RUN_MANIFEST_H
