#include "Manifest.h"
#include "JsonObject.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

namespace mrun {

using nlohmann::json;

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t Arg::localElements() const { return numElements(localShape); }

bool Arg::isAdamState() const {
  return role == MGT_ROLE_ADAM_M || role == MGT_ROLE_ADAM_V;
}

bool Arg::isOptimizerState() const {
  return isAdamState() || role == MGT_ROLE_MASTER;
}

bool Arg::isFunctionIO() const {
  return role == MGT_ROLE_INPUT || role == MGT_ROLE_OUTPUT;
}

TensorSlice Arg::slice(int64_t tpSize, int64_t tpRank, int64_t dpSize,
                       int64_t dpRank) const {
  TensorSlice s;
  s.globalShape = globalShape;
  s.checkpointShape = checkpointShape;
  for (int64_t g : globalShape)
    s.dims.push_back({Interval{0, 0, g}});
  // A dimension split twice is split by the second axis within the first.
  std::vector<bool> split(globalShape.size(), false);
  for (const Split &sp : splits) {
    const bool dp = sp.axis == MGT_AXIS_NAME_DP;
    int64_t parts = dp ? dpSize : tpSize, rank = dp ? dpRank : tpRank;
    if (sp.size > 0) {
      parts = sp.size;
      rank = (tpRank / sp.stride) % sp.size;
    }
    s.dims[sp.dim] =
        split[sp.dim]
            ? nestSlice(s.dims[sp.dim], parts, rank)
            : sliceDim(globalShape[sp.dim], parts, sp.sections, rank);
    split[sp.dim] = true;
  }
  return s;
}

bool Manifest::hasEntry(const std::string &e) const {
  for (const std::string &x : entries)
    if (x == e)
      return true;
  return false;
}

double Manifest::flopsOf(const std::string &entry) const {
  const auto it = flops.find(entry);
  return it == flops.end() ? 0.0 : it->second;
}

bool Manifest::hasGrads() const {
  bool any = false;
  for (const Arg &a : args)
    if (a.role == MGT_ROLE_PARAM) {
      if (a.grad < 0)
        return false;
      any = true;
    }
  return any;
}

namespace {

[[noreturn]] void fail(const std::string &msg) {
  throw std::runtime_error("invalid manifest: " + msg);
}

int64_t getInt(const json &j, const char *key, const std::string &where) {
  if (!j.contains(key))
    fail(where + ": missing \"" + key + "\"");
  if (!j[key].is_number_integer())
    fail(where + ": \"" + key + "\" must be an integer");
  return j[key].get<int64_t>();
}

std::string getString(const json &j, const char *key,
                      const std::string &where) {
  if (!j.contains(key) || !j[key].is_string())
    fail(where + ": missing or non-string \"" + key + "\"");
  return j[key].get<std::string>();
}

std::vector<int64_t> getShape(const json &j, const char *key,
                              const std::string &where) {
  if (!j.contains(key) || !j[key].is_array())
    fail(where + ": missing or non-array \"" + key + "\"");
  std::vector<int64_t> shape;
  for (const json &d : j[key]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      fail(where + ": \"" + key + "\" must hold non-negative integers");
    shape.push_back(d.get<int64_t>());
  }
  // Counted in bytes of the widest element type, the size must not wrap.
  int64_t bytes = 8;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bytes, d, &bytes))
      fail(where + ": \"" + key + "\" " + shapeString(shape) +
           " is too large to count in 64 bits");
  return shape;
}

// "init": {"kind": "normal" | "constant", "value": std or constant}.
void parseInit(const json &init, const std::string &where, Arg &a) {
  if (!init.is_object())
    fail(where + ": \"init\" must be an object");
  const std::string kind = getString(init, MGT_FIELD_INIT_KIND, where + " init");
  if (kind != MGT_INIT_NORMAL && kind != MGT_INIT_CONSTANT)
    fail(where + ": init kind \"" + kind + "\" (known: \"" MGT_INIT_NORMAL
         "\", \"" MGT_INIT_CONSTANT "\")");
  if (!init.contains(MGT_FIELD_INIT_VALUE) ||
      !init[MGT_FIELD_INIT_VALUE].is_number() ||
      !std::isfinite(init[MGT_FIELD_INIT_VALUE].get<double>()))
    fail(where + ": init needs a finite number \"value\"");
  a.hasInit = true;
  a.initNormal = kind == MGT_INIT_NORMAL;
  a.initValue = init[MGT_FIELD_INIT_VALUE].get<double>();
  if (a.initNormal && a.initValue < 0)
    fail(where + ": init normal needs a non-negative std");
}

Arg parseArg(const json &j, size_t index, int64_t dp, int64_t tp) {
  std::string where = "args[" + std::to_string(index) + "]";
  if (!j.is_object())
    fail(where + " is not an object");
  Arg a;
  a.name = getString(j, MGT_FIELD_NAME, where);
  where += " \"" + a.name + "\"";
  a.role = getString(j, MGT_FIELD_ROLE, where);
  a.dtype = getString(j, MGT_FIELD_DTYPE, where);
  if (a.role == MGT_ROLE_PARAM) {
    if (a.dtype != MGT_DTYPE_F32 && a.dtype != MGT_DTYPE_BF16)
      fail(where + ": dtype \"" + a.dtype + "\" (params must be f32 or bf16)");
    if (j.contains(MGT_FIELD_INIT))
      parseInit(j[MGT_FIELD_INIT], where, a);
  } else if (a.role == MGT_ROLE_ADAM_M || a.role == MGT_ROLE_ADAM_V ||
             a.role == MGT_ROLE_GRAD || a.role == MGT_ROLE_MASTER ||
             a.role == MGT_ROLE_HYPERPARAMETERS || a.role == MGT_ROLE_LOGITS) {
    if (a.dtype != MGT_DTYPE_F32)
      fail(where + ": dtype \"" + a.dtype + "\" (" + a.role +
           " must be f32)");
    if (a.role != MGT_ROLE_HYPERPARAMETERS && a.role != MGT_ROLE_LOGITS)
      a.param = getString(j, MGT_FIELD_PARAM, where);
  } else if (a.role == MGT_ROLE_INPUT || a.role == MGT_ROLE_OUTPUT) {
    if (a.dtype != MGT_DTYPE_F32)
      fail(where + ": dtype \"" + a.dtype + "\" (a function's " + a.role +
           "s are f32)");
  } else if (a.role == MGT_ROLE_KV_CACHE) {
    if (a.dtype != MGT_DTYPE_F32)
      fail(where + ": dtype \"" + a.dtype + "\" (a KV cache is f32)");
  } else if (a.role == MGT_ROLE_TOKENS || a.role == MGT_ROLE_TARGETS ||
             a.role == MGT_ROLE_NEXT_TOKENS || a.role == MGT_ROLE_POSITIONS ||
             a.role == MGT_ROLE_LAST_INDEX) {
    if (a.dtype != MGT_DTYPE_I32)
      fail(where + ": dtype \"" + a.dtype + "\" (" + a.role + " must be i32)");
  } else {
    fail(where + ": unsupported role \"" + a.role + "\"");
  }
  if (j.contains(MGT_FIELD_MEMORY)) {
    std::string memory = getString(j, MGT_FIELD_MEMORY, where);
    if (memory != MGT_MEMORY_HOST && memory != MGT_MEMORY_DEVICE)
      fail(where + ": \"memory\" must be \"host\" or \"device\"");
    a.onDevice = memory == MGT_MEMORY_DEVICE;
  }
  a.globalShape = getShape(j, MGT_FIELD_GLOBAL_SHAPE, where);
  a.localShape = getShape(j, MGT_FIELD_LOCAL_SHAPE, where);
  a.checkpointShape = j.contains(MGT_FIELD_CHECKPOINT_SHAPE)
                          ? getShape(j, MGT_FIELD_CHECKPOINT_SHAPE, where)
                          : a.globalShape;
  const size_t rank = a.globalShape.size();
  if (a.localShape.size() != rank || a.checkpointShape.size() != rank)
    fail(where + ": global_shape, local_shape and checkpoint_shape must "
                 "have the same rank");
  for (size_t d = 0; d < rank; ++d)
    if (a.checkpointShape[d] > a.globalShape[d])
      fail(where + ": checkpoint_shape " + shapeString(a.checkpointShape) +
           " exceeds global_shape " + shapeString(a.globalShape));
  if (j.contains(MGT_FIELD_SPLIT)) {
    if (!j[MGT_FIELD_SPLIT].is_array())
      fail(where + ": \"split\" must be an array");
    for (const json &s : j[MGT_FIELD_SPLIT]) {
      if (!s.is_object())
        fail(where + ": split entries must be objects");
      Split sp;
      int64_t dim = getInt(s, MGT_FIELD_SPLIT_DIM, where + " split");
      if (dim < 0 || dim >= static_cast<int64_t>(rank))
        fail(where + ": split dim " + std::to_string(dim) + " out of range");
      sp.dim = static_cast<int>(dim);
      sp.axis = getString(s, MGT_FIELD_SPLIT_AXIS, where + " split");
      if (sp.axis != MGT_AXIS_NAME_TP && sp.axis != MGT_AXIS_NAME_DP)
        fail(where + ": unsupported split axis \"" + sp.axis + "\"");
      const bool batch = dim == 0 && (a.role == MGT_ROLE_TOKENS ||
                                      a.role == MGT_ROLE_TARGETS);
      if (sp.axis == MGT_AXIS_NAME_DP && !batch && !a.isOptimizerState() &&
          !a.isFunctionIO())
        fail(where + ": only the tokens' and targets' batch (dim 0), AdamW "
                     "state and master weights (ZeRO-1) and a function's "
                     "inputs and outputs are split over \"" MGT_AXIS_NAME_DP
                     "\"");
      sp.sections = s.contains(MGT_FIELD_SPLIT_SECTIONS)
                        ? getInt(s, MGT_FIELD_SPLIT_SECTIONS, where)
                        : 1;
      if (s.contains(MGT_FIELD_SPLIT_STRIDE) ||
          s.contains(MGT_FIELD_SPLIT_SIZE)) {
        sp.stride = getInt(s, MGT_FIELD_SPLIT_STRIDE, where + " split");
        sp.size = getInt(s, MGT_FIELD_SPLIT_SIZE, where + " split");
        if (sp.axis != MGT_AXIS_NAME_TP || sp.stride < 1 || sp.size < 2 ||
            tp % (sp.stride * sp.size) != 0)
          fail(where + ": split over a sub-axis of \"" + sp.axis +
               "\" with stride " + std::to_string(sp.stride) + " and size " +
               std::to_string(sp.size) + ", which tp=" + std::to_string(tp) +
               " does not factor into");
      }
      // A second split of a dim nests inside the first: over the other
      // axis, without sections.
      for (const Split &o : a.splits)
        if (o.dim == sp.dim && (o.axis == sp.axis || sp.sections != 1))
          fail(where + ": dim " + std::to_string(dim) + " split twice over \"" +
               sp.axis + "\"" + (o.axis == sp.axis ? "" : " with sections"));
      a.splits.push_back(sp);
    }
  }
  // The local shape must be what the slicing rule gives.
  try {
    std::vector<int64_t> expected = a.slice(tp, 0, dp, 0).localShape();
    if (expected != a.localShape)
      fail(where + ": local_shape " + shapeString(a.localShape) +
           " does not match global_shape " + shapeString(a.globalShape) +
           " split over dp=" + std::to_string(dp) + ", tp=" +
           std::to_string(tp) + " (expected " +
           shapeString(expected) + ")");
  } catch (const std::invalid_argument &e) {
    fail(where + ": " + e.what());
  }
  return a;
}

// Where a generation step's per-sequence arg of `role` goes.
int *perSequenceSlot(const std::string &role, Manifest &m) {
  return role == MGT_ROLE_NEXT_TOKENS ? &m.nextTokens
         : role == MGT_ROLE_POSITIONS ? &m.positions
                                      : &m.lastIndex;
}

// next_tokens [batch, 1], positions and last_index [batch]: replicated, one
// of each, in a generation step only (`slot` null otherwise), at args
// `index`.
void checkPerSequence(const Arg &a, const Manifest &m, int *slot,
                      size_t index) {
  const std::string where = "\"" + a.name + "\" (" + a.role + ")";
  if (!slot)
    fail(where + ": only a generation step (entries prefill, decode) takes "
                 "one");
  if (*slot >= 0)
    fail("more than one arg with role \"" + a.role + "\"");
  std::vector<int64_t> shape{m.batch};
  if (a.role == MGT_ROLE_NEXT_TOKENS)
    shape.push_back(1);
  if (a.globalShape != shape || a.localShape != shape || !a.splits.empty())
    fail(where + " must have global and local shape " + shapeString(shape) +
         " and no split");
  *slot = static_cast<int>(index);
}

// A KV cache: [layers, batch, heads, ctx, head_dim], split by heads (dim 2)
// only; both caches alike. Sets m.ctx.
void checkKVCache(const Arg &a, Manifest &m, bool generation, int &caches) {
  const std::string where = "\"" + a.name + "\" (kv_cache)";
  if (!generation)
    fail(where + ": only a generation step (entries prefill, decode) takes "
                 "one");
  bool ok = a.globalShape.size() == 5 && a.globalShape[1] == m.batch &&
            a.globalShape[3] >= m.seq;
  for (const Split &sp : a.splits)
    ok &= sp.dim == 2;
  if (!ok || (caches > 0 && a.globalShape[3] != m.ctx))
    fail(where + " must have global_shape [layers, " +
         std::to_string(m.batch) + ", heads, ctx, head_dim] with ctx >= seq " +
         std::to_string(m.seq) + " (the same for both caches) and no split "
         "but of the heads (got " + shapeString(a.globalShape) + ")");
  m.ctx = a.globalShape[3];
  ++caches;
}

// Everything generation feeds and reads.
void checkGenerationArgs(const Manifest &m, int caches) {
  if (m.tokens < 0 || m.nextTokens < 0 || m.positions < 0 ||
      m.lastIndex < 0 || m.logits < 0 || caches != 2)
    fail("a generation step needs one arg each with role \"" MGT_ROLE_TOKENS
         "\", \"" MGT_ROLE_NEXT_TOKENS "\", \"" MGT_ROLE_POSITIONS
         "\", \"" MGT_ROLE_LAST_INDEX "\" and \"" MGT_ROLE_LOGITS
         "\", and two with \"" MGT_ROLE_KV_CACHE "\"");
  if (m.targets >= 0)
    fail("a generation step has no \"" MGT_ROLE_TARGETS "\"");
}

// "stacks": each a list of distinct arg indices of one byte size and
// memory, in no other stack.
std::vector<std::vector<int>> parseStacks(const json &stacks,
                                          const std::vector<Arg> &args) {
  if (!stacks.is_array())
    fail("\"stacks\" must be an array");
  std::vector<std::vector<int>> parsed;
  std::vector<int> stackOf(args.size(), -1);
  for (size_t s = 0; s < stacks.size(); ++s) {
    const std::string where = "stacks[" + std::to_string(s) + "]";
    if (!stacks[s].is_array() || stacks[s].size() < 2)
      fail(where + " must list two or more arg indices");
    std::vector<int> members;
    for (const json &index : stacks[s]) {
      if (!index.is_number_integer() || index.get<int64_t>() < 0 ||
          index.get<int64_t>() >= static_cast<int64_t>(args.size()))
        fail(where + ": " + index.dump() + " is not an arg index (0.." +
             std::to_string(args.size() - 1) + ")");
      const int arg = index.get<int>();
      if (stackOf[arg] >= 0)
        fail(where + ": \"" + args[arg].name + "\" is already in stacks[" +
             std::to_string(stackOf[arg]) + "]");
      const Arg &first = args[members.empty() ? arg : members.front()];
      const Arg &a = args[arg];
      if (a.localElements() * a.elementBytes() !=
              first.localElements() * first.elementBytes() ||
          a.onDevice != first.onDevice)
        fail(where + ": \"" + a.name + "\" differs from \"" + first.name +
             "\" in size or memory");
      stackOf[arg] = static_cast<int>(s);
      members.push_back(arg);
    }
    parsed.push_back(std::move(members));
  }
  return parsed;
}

} // namespace

namespace {

// A number as the manifest writes it: a whole number as an integer.
json number(double value) {
  if (std::trunc(value) == value && std::fabs(value) < 9007199254740992.0)
    return static_cast<int64_t>(value);
  return value;
}

json argJson(const Arg &a) {
  json split = json::array();
  for (const Split &s : a.splits) {
    json entry = {{MGT_FIELD_SPLIT_DIM, s.dim},
                  {MGT_FIELD_SPLIT_AXIS, s.axis},
                  {MGT_FIELD_SPLIT_SECTIONS, s.sections}};
    if (s.size > 0) {
      entry[MGT_FIELD_SPLIT_STRIDE] = s.stride;
      entry[MGT_FIELD_SPLIT_SIZE] = s.size;
    }
    split.push_back(std::move(entry));
  }
  json j = {{MGT_FIELD_NAME, a.name},
            {MGT_FIELD_ROLE, a.role},
            {MGT_FIELD_DTYPE, a.dtype},
            {MGT_FIELD_GLOBAL_SHAPE, a.globalShape},
            {MGT_FIELD_LOCAL_SHAPE, a.localShape},
            {MGT_FIELD_CHECKPOINT_SHAPE, a.checkpointShape},
            {MGT_FIELD_SPLIT, std::move(split)},
            {MGT_FIELD_MEMORY, a.onDevice ? MGT_MEMORY_DEVICE : MGT_MEMORY_HOST}};
  if (!a.param.empty())
    j[MGT_FIELD_PARAM] = a.param;
  if (a.hasInit)
    j[MGT_FIELD_INIT] = {
        {MGT_FIELD_INIT_KIND, a.initNormal ? MGT_INIT_NORMAL : MGT_INIT_CONSTANT},
        {MGT_FIELD_INIT_VALUE, number(a.initValue)}};
  return j;
}

} // namespace

std::string writeManifest(const Manifest &m) {
  json args = json::array();
  for (const Arg &a : m.args)
    args.push_back(argJson(a));
  json flops = json::object();
  for (const auto &[entry, value] : m.flops)
    flops[entry] = number(value);
  json j = {{MGT_FIELD_FORMAT, MGT_MANIFEST_FORMAT},
            {MGT_FIELD_VERSION, MGT_MANIFEST_VERSION},
            {MGT_FIELD_MODEL, m.model},
            {MGT_FIELD_TARGET, m.target},
            {MGT_FIELD_COMPUTE, m.compute},
            {MGT_FIELD_DP, m.dp},
            {MGT_FIELD_TP, m.tp},
            {MGT_FIELD_BATCH, m.batch},
            {MGT_FIELD_SEQ, m.seq},
            {MGT_FIELD_VALID_VOCAB, m.validVocab},
            {MGT_FIELD_ENTRIES, m.entries},
            {MGT_FIELD_FLOPS, std::move(flops)},
            {MGT_FIELD_ARGS, std::move(args)}};
  if (!m.stacks.empty())
    j[MGT_FIELD_STACKS] = m.stacks;
  if (!m.checkpointNamesScheme.empty())
    j[MGT_FIELD_CHECKPOINT_NAMES] = m.checkpointNamesScheme;
  return j.dump();
}

std::string manifestError(const std::string &json) {
  try {
    parseManifest(json);
    return "";
  } catch (const std::exception &e) {
    return e.what();
  }
}

Manifest parseManifest(const std::string &text) {
  std::string why;
  std::optional<json> parsed = parseJsonObject(text, why);
  if (!parsed)
    fail(why);
  const json &j = *parsed;
  if (getString(j, MGT_FIELD_FORMAT, "manifest") != MGT_MANIFEST_FORMAT)
    fail("\"format\" is not \"" MGT_MANIFEST_FORMAT "\"");
  int64_t version = getInt(j, MGT_FIELD_VERSION, "manifest");
  if (version != MGT_MANIFEST_VERSION)
    fail("the step library was built for manifest version " +
         std::to_string(version) + ", this megatron-run reads version " +
         std::to_string(MGT_MANIFEST_VERSION) +
         ": rebuild the step with this release's megatron-compile");
  Manifest m;
  m.model = j.contains(MGT_FIELD_MODEL) && j[MGT_FIELD_MODEL].is_string()
                ? j[MGT_FIELD_MODEL].get<std::string>()
                : "?";
  if (j.contains(MGT_FIELD_TARGET)) {
    m.target = getString(j, MGT_FIELD_TARGET, "manifest");
    if (m.target != MGT_TARGET_CPU && m.target != MGT_TARGET_CUDA)
      fail("\"target\" must be \"cpu\" or \"cuda\"");
  }
  if (j.contains(MGT_FIELD_COMPUTE)) {
    m.compute = getString(j, MGT_FIELD_COMPUTE, "manifest");
    if (m.compute != MGT_DTYPE_F32 && m.compute != MGT_DTYPE_BF16)
      fail("\"compute\" must be \"f32\" or \"bf16\"");
  }
  if (j.contains(MGT_FIELD_ENTRIES)) {
    if (!j[MGT_FIELD_ENTRIES].is_array())
      fail("\"entries\" must be an array");
    for (const json &e : j[MGT_FIELD_ENTRIES]) {
      if (!e.is_string() ||
          (e.get<std::string>() != MGT_ENTRY_KIND_FORWARD &&
           e.get<std::string>() != MGT_ENTRY_KIND_TRAIN_STEP &&
           e.get<std::string>() != MGT_ENTRY_KIND_FUNCTION &&
           e.get<std::string>() != MGT_ENTRY_KIND_PREFILL &&
           e.get<std::string>() != MGT_ENTRY_KIND_DECODE))
        fail("unknown entry " + e.dump() +
             " in \"entries\" (known: \"forward\", \"train_step\", "
             "\"function\", \"prefill\", \"decode\")");
      m.entries.push_back(e.get<std::string>());
    }
  } else {
    m.entries = {MGT_ENTRY_KIND_FORWARD};
  }
  const bool function = m.hasEntry(MGT_ENTRY_KIND_FUNCTION);
  if (function && m.entries.size() != 1)
    fail("a \"function\" step has no other entry");
  const bool generation = m.hasEntry(MGT_ENTRY_KIND_PREFILL) ||
                          m.hasEntry(MGT_ENTRY_KIND_DECODE);
  if (generation &&
      m.entries != std::vector<std::string>{MGT_ENTRY_KIND_PREFILL,
                                            MGT_ENTRY_KIND_DECODE})
    fail("a generation step's entries are [\"prefill\", \"decode\"]");
  if (j.contains(MGT_FIELD_FLOPS)) {
    const json &flops = j[MGT_FIELD_FLOPS];
    if (!flops.is_object())
      fail("\"flops\" must be an object");
    for (const auto &[entry, value] : flops.items()) {
      if (!value.is_number() || value.get<double>() < 0)
        fail("\"flops\" of \"" + entry + "\" must be a non-negative number");
      m.flops[entry] = value.get<double>();
    }
  }
  m.dp = getInt(j, MGT_FIELD_DP, "manifest");
  m.tp = getInt(j, MGT_FIELD_TP, "manifest");
  m.batch = getInt(j, MGT_FIELD_BATCH, "manifest");
  m.seq = getInt(j, MGT_FIELD_SEQ, "manifest");
  m.validVocab = getInt(j, MGT_FIELD_VALID_VOCAB, "manifest");
  if (m.dp < 1 || m.tp < 1)
    fail("dp and tp must be positive");
  // The vocabulary-parallel sampling exchanges token ids as floats, exact
  // below 2^24.
  constexpr int64_t kExactFloatIds = int64_t{1} << 24;
  if (generation && m.validVocab >= kExactFloatIds)
    fail("valid_vocab " + std::to_string(m.validVocab) +
         ": generation's sampling takes vocabularies below 2^24");
  // A function has no tokens and no loss.
  if (function ? m.batch != 0 || m.seq != 0 || m.validVocab != 0
               : m.batch < 1 || m.seq < 1 || m.validVocab < 1)
    fail(function ? "a \"function\" step has batch, seq and valid_vocab 0"
                  : "batch, seq and valid_vocab must be positive");
  if (j.contains(MGT_FIELD_CHECKPOINT_NAMES)) {
    try {
      m.checkpointNamesScheme =
          getString(j, MGT_FIELD_CHECKPOINT_NAMES, "manifest");
      m.checkpointNames = checkpointNamesFor(m.checkpointNamesScheme);
    } catch (const std::invalid_argument &e) {
      fail(e.what());
    }
  }
  if (!j.contains(MGT_FIELD_ARGS) || !j[MGT_FIELD_ARGS].is_array())
    fail("missing \"args\" array");
  std::set<std::string> names;
  int kvCaches = 0;
  for (size_t i = 0; i < j[MGT_FIELD_ARGS].size(); ++i) {
    Arg a = parseArg(j[MGT_FIELD_ARGS][i], i, m.dp, m.tp);
    if (!names.insert(a.name).second)
      fail("duplicate arg name \"" + a.name + "\"");
    if (function != a.isFunctionIO())
      fail("args[" + std::to_string(i) + "] \"" + a.name + "\": role \"" +
           a.role + "\" " +
           (function ? "in a \"function\" step (only \"input\" and "
                       "\"output\")"
                     : "outside a \"function\" step"));
    if (a.role == MGT_ROLE_HYPERPARAMETERS) {
      if (m.hyperparameters >= 0)
        fail("more than one arg with role \"hyperparameters\"");
      const std::vector<int64_t> slots{MGT_HP_COUNT};
      if (a.globalShape != slots || a.localShape != slots ||
          !a.splits.empty())
        fail("\"" + a.name + "\" must have global and local shape " +
             shapeString(slots) + " and no split");
      // The launcher writes them before every step, into its host buffer.
      if (a.onDevice)
        fail("\"" + a.name + "\" must be in host memory");
      m.hyperparameters = static_cast<int>(i);
    }
    if (a.role == MGT_ROLE_LOGITS) {
      if (m.logits >= 0)
        fail("more than one arg with role \"logits\"");
      // Generation's logits are those of one position per sequence.
      std::vector<int64_t> ckpt{m.batch, m.seq, m.validVocab};
      if (generation)
        ckpt.erase(ckpt.begin() + 1);
      const int vocabDim = static_cast<int>(ckpt.size()) - 1;
      bool ok = a.globalShape.size() == ckpt.size() &&
                a.checkpointShape == ckpt &&
                std::equal(ckpt.begin(), ckpt.end() - 1, a.globalShape.begin());
      for (const Split &sp : a.splits)
        ok &= sp.dim == vocabDim;
      if (!ok)
        fail("\"" + a.name + "\" (logits) must have global_shape " +
             (generation ? "[" + std::to_string(m.batch) + ", V]"
                         : "[" + std::to_string(m.batch) + ", " +
                               std::to_string(m.seq) + ", V]") +
             ", checkpoint_shape " + shapeString(ckpt) +
             " and no split but of dim " + std::to_string(vocabDim) +
             " (got global_shape " + shapeString(a.globalShape) +
             ", checkpoint_shape " + shapeString(a.checkpointShape) + ")");
      m.logits = static_cast<int>(i);
    }
    if (a.role == MGT_ROLE_NEXT_TOKENS || a.role == MGT_ROLE_POSITIONS ||
        a.role == MGT_ROLE_LAST_INDEX)
      checkPerSequence(a, m, generation ? perSequenceSlot(a.role, m) : nullptr,
                       i);
    if (a.role == MGT_ROLE_KV_CACHE)
      checkKVCache(a, m, generation, kvCaches);
    int *slot = a.role == MGT_ROLE_TOKENS    ? &m.tokens
                : a.role == MGT_ROLE_TARGETS ? &m.targets
                                             : nullptr;
    if (slot) {
      if (*slot >= 0)
        fail("more than one arg with role \"" + a.role + "\"");
      // Each dp rank takes its rows of the global batch.
      std::vector<int64_t> bt{m.batch, m.seq}, local{m.batch / m.dp, m.seq};
      const bool split = a.splits.size() == 1 &&
                         a.splits[0].axis == MGT_AXIS_NAME_DP;
      if (a.globalShape != bt || a.localShape != local ||
          (m.dp > 1) != split || (!split && !a.splits.empty()))
        fail("\"" + a.name + "\" must have global shape " + shapeString(bt) +
             " and local shape " + shapeString(local) +
             (m.dp > 1 ? ", its batch split over \"" MGT_AXIS_NAME_DP "\""
                       : " and no split"));
      *slot = static_cast<int>(i);
    }
    m.args.push_back(std::move(a));
  }
  if (generation)
    checkGenerationArgs(m, kvCaches);
  else if (!function && (m.tokens < 0 || m.targets < 0))
    fail("needs one arg with role \"" MGT_ROLE_TOKENS
         "\" and one with \"" MGT_ROLE_TARGETS "\"");

  // Optimizer state and gradients: tied to their parameter.
  std::map<std::string, int> params;
  for (size_t i = 0; i < m.args.size(); ++i)
    if (m.args[i].role == MGT_ROLE_PARAM)
      params[m.args[i].name] = static_cast<int>(i);
  for (size_t i = 0; i < m.args.size(); ++i) {
    Arg &a = m.args[i];
    if (a.param.empty())
      continue;
    const std::string where = "args[" + std::to_string(i) + "] \"" + a.name +
                              "\" (" + a.role + ")";
    auto it = params.find(a.param);
    if (it == params.end())
      fail(where + ": \"param\": \"" + a.param + "\" is not a parameter");
    Arg &p = m.args[it->second];
    auto sameSplits = [](const std::vector<Split> &x,
                         const std::vector<Split> &y) {
      if (x.size() != y.size())
        return false;
      for (size_t k = 0; k < x.size(); ++k)
        if (x[k].dim != y[k].dim || x[k].axis != y[k].axis ||
            x[k].sections != y[k].sections)
          return false;
      return true;
    };
    // AdamW state and master weights may also be split over dp (ZeRO-1),
    // the local shape then a share of the parameter's.
    std::vector<Split> splits = a.splits;
    if (a.isOptimizerState())
      splits.erase(std::remove_if(splits.begin(), splits.end(),
                                  [](const Split &sp) {
                                    return sp.axis == MGT_AXIS_NAME_DP;
                                  }),
                   splits.end());
    const bool zero = splits.size() != a.splits.size();
    if (a.globalShape != p.globalShape ||
        (!zero && a.localShape != p.localShape) ||
        a.checkpointShape != p.checkpointShape || !sameSplits(splits, p.splits))
      fail(where + ": shapes or split differ from those of parameter \"" +
           p.name + "\"");
    int &slot = a.role == MGT_ROLE_ADAM_M   ? p.adamM
                : a.role == MGT_ROLE_ADAM_V ? p.adamV
                : a.role == MGT_ROLE_MASTER ? p.master
                                            : p.grad;
    if (slot >= 0)
      fail("parameter \"" + p.name + "\" has more than one " + a.role +
           " arg");
    slot = static_cast<int>(i);
    a.paramIndex = it->second;
  }

  bool anyGrad = false;
  for (const Arg &a : m.args)
    anyGrad |= a.role == MGT_ROLE_GRAD;
  for (const Arg &a : m.args) {
    if (a.role != MGT_ROLE_PARAM)
      continue;
    if (anyGrad && a.grad < 0)
      fail("parameter \"" + a.name + "\" has no grad arg (others have)");
    // A bf16 param's fp32 values are its master's: the one without the
    // other could not be loaded or saved.
    if ((a.dtype == MGT_DTYPE_BF16) != (a.master >= 0))
      fail("parameter \"" + a.name + "\" is " + a.dtype +
           (a.master >= 0 ? " but has a master arg (only a bf16 param has one)"
                          : " but has no master arg (its fp32 values)"));
    if (m.hasEntry(MGT_ENTRY_KIND_TRAIN_STEP) && (a.adamM < 0 || a.adamV < 0))
      fail("entry train_step, but parameter \"" + a.name +
           "\" has no adam_m / adam_v arg");
  }
  if (m.hasEntry(MGT_ENTRY_KIND_TRAIN_STEP) && m.hyperparameters < 0)
    fail("entry train_step, but no arg with role \"hyperparameters\"");
  if (j.contains(MGT_FIELD_STACKS))
    m.stacks = parseStacks(j[MGT_FIELD_STACKS], m.args);
  return m;
}

} // namespace mrun
