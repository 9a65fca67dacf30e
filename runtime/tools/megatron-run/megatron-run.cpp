// megatron-run: loads a training step compiled by megatron-mlir (step.so),
// creates the runtime's MPI context, initialises this rank's parameter slices
// (GPT-2 init from a seed, or a global safetensors checkpoint), feeds token
// batches and runs the step. See README.md.
#include "Checkpoint.h"
#include "Init.h"
#include "Manifest.h"
#include "Options.h"
#include "TokenData.h"

#include "megatron_rt/comm.h"

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlfcn.h>

namespace {

using namespace mrun;

extern "C" {
typedef const char *(*ManifestFn)(void);
typedef float (*ForwardFn)(mrt_context *, void **);
}

void error(const std::string &msg) {
  // One write per message keeps lines from several ranks from interleaving.
  std::string line = "megatron-run: " + msg + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

// Collective agreement over the whole mesh: returns true when no rank
// failed. Otherwise the lowest failing rank prints its message and every
// rank returns false, so no rank proceeds into a collective that another
// rank will never join.
bool agree(mrt_context *ctx, const std::string &err) {
  const int64_t world = mrt_axis_size(ctx, MRT_AXIS_TP) *
                        mrt_axis_size(ctx, MRT_AXIS_DP);
  const int64_t me = mrt_world_rank(ctx);
  float flag = err.empty() ? 0.0f : static_cast<float>(world - me);
  mrt_all_reduce_f32(ctx, MRT_AXIS_TP, &flag, 1, MRT_REDUCE_MAX);
  mrt_all_reduce_f32(ctx, MRT_AXIS_DP, &flag, 1, MRT_REDUCE_MAX);
  if (flag == 0.0f)
    return true;
  const int64_t first = world - static_cast<int64_t>(flag);
  if (me == first)
    error(world > 1 ? "rank " + std::to_string(me) + ": " + err : err);
  return false;
}

struct Buffers {
  std::vector<void *> ptrs;
  ~Buffers() {
    for (void *p : ptrs)
      std::free(p);
  }
};

void *allocZeroed(size_t bytes) {
  const size_t align = 64;
  size_t size = (bytes + align - 1) / align * align;
  if (size == 0)
    size = align;
  void *p = std::aligned_alloc(align, size);
  if (!p)
    throw std::bad_alloc();
  std::memset(p, 0, size);
  return p;
}

std::string jsonNumber(double v, const char *fmt) {
  if (!std::isfinite(v))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

int run(const Options &opt) {
  // --- the step library (identical on every rank: errors need no agreement)
  std::string libPath = opt.stepLibrary;
  if (libPath.find('/') == std::string::npos)
    libPath = "./" + libPath; // dlopen would search the library path
  void *lib = dlopen(libPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    error("cannot load " + opt.stepLibrary + ": " + dlerror());
    return 1;
  }
  auto manifestFn = reinterpret_cast<ManifestFn>(dlsym(lib, "mgt_manifest"));
  auto forwardFn = reinterpret_cast<ForwardFn>(dlsym(lib, "mgt_forward"));
  void *trainFn = dlsym(lib, "mgt_train_step");
  if (!manifestFn || !forwardFn) {
    error(opt.stepLibrary + " does not export " +
          (manifestFn ? "mgt_forward" : "mgt_manifest") +
          " (not a step library compiled by megatron-mlir?)");
    return 1;
  }
  Manifest m;
  try {
    const char *text = manifestFn();
    m = parseManifest(text ? text : "");
  } catch (const std::exception &e) {
    error(opt.stepLibrary + ": " + e.what());
    return 1;
  }
  if (!opt.evalOnly) {
    error(trainFn ? opt.stepLibrary +
                        " exports mgt_train_step, but this megatron-run "
                        "does not support training yet; pass --eval-only"
                  : "step.so was compiled without --train; pass --eval-only");
    return 1;
  }

  // --- the MPI context (every rank sees the same world size)
  char err[512];
  mrt_context *ctx = mrt_context_create(m.tp, err, sizeof(err));
  if (!ctx) {
    error(opt.stepLibrary + " was compiled for tp=" + std::to_string(m.tp) +
          ": launch it as `mpirun -np " + std::to_string(m.tp) +
          " megatron-run ...` (" + err + ")");
    return 1;
  }
  const int64_t tpSize = mrt_axis_size(ctx, MRT_AXIS_TP);
  const int64_t tpRank = mrt_axis_rank(ctx, MRT_AXIS_TP);
  const bool rank0 = mrt_world_rank(ctx) == 0;
  const int64_t bt = m.batch * m.seq;

  // --- buffers, weights, data, log: any rank may fail; all agree first
  Buffers buffers;
  std::unique_ptr<TokenFile> data;
  FILE *log = nullptr;
  std::string failure;
  int64_t localParams = 0;
  try {
    for (const Arg &a : m.args)
      buffers.ptrs.push_back(allocZeroed(a.localElements() * a.elementBytes()));
    std::unique_ptr<Checkpoint> ckpt;
    if (!opt.initFrom.empty()) {
      ckpt = std::make_unique<Checkpoint>(opt.initFrom);
      ckpt->checkAgainst(m);
    }
    const int64_t layers = m.numLayers();
    for (size_t i = 0; i < m.args.size(); ++i) {
      const Arg &a = m.args[i];
      if (a.role != "param")
        continue;
      const TensorSlice slice = a.slice(tpSize, tpRank);
      auto *out = static_cast<float *>(buffers.ptrs[i]);
      if (ckpt)
        ckpt->readSlice(a, slice, out);
      else
        initParam(a, slice, layers, opt.seed, out);
      localParams += a.localElements();
    }
    data = std::make_unique<TokenFile>(opt.data);
    // Tokens used by steps [0, steps): indices [0, steps*B*T + 1) mod count.
    const int64_t uses = opt.steps > (INT64_MAX - 1) / bt
                             ? INT64_MAX
                             : opt.steps * bt + 1;
    data->validate(m.batch, m.seq, m.validVocab, uses);
    if (rank0 && !opt.log.empty()) {
      log = std::fopen(opt.log.c_str(), "w");
      if (!log)
        throw std::runtime_error("cannot write log " + opt.log + ": " +
                                 std::strerror(errno));
    }
  } catch (const std::exception &e) {
    failure = e.what();
  }
  if (!agree(ctx, failure)) {
    if (log)
      std::fclose(log);
    mrt_context_destroy(ctx);
    return 1;
  }
  if (rank0)
    error(opt.stepLibrary + ": model " + m.model + ", tp " +
          std::to_string(m.tp) + ", batch " + std::to_string(m.batch) +
          ", seq " + std::to_string(m.seq) + ", " +
          std::to_string(localParams) + " parameters on rank 0; weights " +
          (opt.initFrom.empty() ? "GPT-2 init, seed " + std::to_string(opt.seed)
                                : "from " + opt.initFrom) +
          "; data " + opt.data + " (" + std::to_string(data->count()) +
          " tokens)");

  // --- steps
  auto *inputs = static_cast<int32_t *>(buffers.ptrs[m.inputIds]);
  auto *targets = static_cast<int32_t *>(buffers.ptrs[m.targets]);
  int status = 0;
  for (int64_t step = 0; step < opt.steps; ++step) {
    failure.clear();
    try {
      data->batch(step, m.batch, m.seq, m.validVocab, inputs, targets);
    } catch (const std::exception &e) {
      failure = e.what();
    }
    if (!agree(ctx, failure)) {
      status = 1;
      break;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const float loss = forwardFn(ctx, buffers.ptrs.data());
    const auto t1 = std::chrono::steady_clock::now();
    if (!rank0)
      continue;
    const double ms =
        std::chrono::duration<double, std::milli>(t1 - t0).count();
    std::printf("step %lld loss %.9g\n", static_cast<long long>(step), loss);
    std::fflush(stdout);
    if (log) {
      std::fprintf(log,
                   "{\"step\":%lld,\"loss\":%s,\"ms\":%s,\"tokens_per_s\":%s}\n",
                   static_cast<long long>(step),
                   jsonNumber(loss, "%.9g").c_str(),
                   jsonNumber(ms, "%.3f").c_str(),
                   jsonNumber(ms > 0 ? bt / (ms / 1000.0) : INFINITY, "%.1f")
                       .c_str());
      std::fflush(log);
    }
  }
  if (log && std::fclose(log) != 0 && status == 0) {
    error("cannot write log " + opt.log + ": " + std::strerror(errno));
    status = 1;
  }
  mrt_context_destroy(ctx);
  return status;
}

} // namespace

int main(int argc, char **argv) {
  Options opt;
  try {
    opt = parseOptions(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::invalid_argument &e) {
    error(std::string(e.what()) + " (see megatron-run --help)");
    return 2;
  }
  if (opt.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  return run(opt);
}
