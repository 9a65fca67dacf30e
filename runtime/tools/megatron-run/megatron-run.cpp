// megatron-run: loads a training step compiled by megatron-mlir (step.so),
// creates the runtime's context (MPI; on a CUDA step also the GPU and NCCL), initialises this rank's parameter slices
// (the model's init rules from a seed, or a global safetensors checkpoint), feeds token
// batches and runs the step. See README.md.
#include "Checkpoint.h"
#include "Init.h"
#include "Manifest.h"
#include "Options.h"
#include "RuntimeApi.h"
#include "Slicing.h"
#include "TokenData.h"

#include "megatron_rt/comm.h"

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlfcn.h>

namespace {

using namespace mrun;

// The runtime of the loaded step (RuntimeApi.h).
RuntimeApi rt;

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
  const int64_t world = rt.axisSize(ctx, MRT_AXIS_TP) *
                        rt.axisSize(ctx, MRT_AXIS_DP);
  const int64_t me = rt.worldRank(ctx);
  float flag = err.empty() ? 0.0f : static_cast<float>(world - me);
  rt.allReduce(ctx, MRT_AXIS_TP, &flag, 1, MRT_REDUCE_MAX);
  rt.allReduce(ctx, MRT_AXIS_DP, &flag, 1, MRT_REDUCE_MAX);
  if (flag == 0.0f)
    return true;
  const int64_t first = world - static_cast<int64_t>(flag);
  if (me == first)
    error(world > 1 ? "rank " + std::to_string(me) + ": " + err : err);
  return false;
}

void *allocZeroed(size_t bytes);

// The step's arguments: a host buffer for each, where they are initialised,
// fed batches and checkpointed; for a CUDA step's device arguments also the
// device buffer the step reads, copied from the host buffer by upload() and
// back by download().
struct Buffers {
  explicit Buffers(const Manifest &m) : m(m) {}
  Buffers(const Buffers &) = delete;
  Buffers &operator=(const Buffers &) = delete;
  ~Buffers() {
    for (void *p : ptrs)
      std::free(p);
    for (void *p : device)
      if (p)
        rt.deviceFree(p);
  }

  void allocate() {
    for (const Arg &a : m.args) {
      const int64_t bytes = a.localElements() * a.elementBytes();
      ptrs.push_back(allocZeroed(bytes));
      device.push_back(a.onDevice ? rt.deviceAlloc(bytes) : nullptr);
      step.push_back(a.onDevice ? device.back() : ptrs.back());
    }
  }

  void upload(int arg) {
    if (device[arg])
      rt.copyToDevice(device[arg], ptrs[arg], bytes(arg));
  }
  void uploadAll() {
    for (size_t i = 0; i < ptrs.size(); ++i)
      upload(static_cast<int>(i));
  }
  void download(int arg) {
    if (device[arg])
      rt.copyToHost(ptrs[arg], device[arg], bytes(arg));
  }

  // The pointer array the step's entry points take.
  void **stepArgs() { return step.data(); }

  std::vector<void *> ptrs; // host, one per manifest arg

private:
  int64_t bytes(int arg) const {
    return m.args[arg].localElements() * m.args[arg].elementBytes();
  }

  const Manifest &m;
  std::vector<void *> device, step;
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

// The shortest %g form that reads back as v.
std::string number(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

// Gathers the GLOBAL (checkpoint-shaped) tensors of manifest args to rank 0
// and streams them there into one safetensors file (atomically: PATH.tmp,
// then rename; the .tmp is removed on failure). Every method is collective:
// all ranks call them in the same order with the same arguments.
class GlobalWriter {
public:
  GlobalWriter(mrt_context *ctx, const Manifest &m, Buffers &buffers)
      : ctx_(ctx), m_(m), buffers_(buffers),
        tp_(rt.axisSize(ctx, MRT_AXIS_TP)),
        rank0_(rt.worldRank(ctx) == 0) {}

  // Creates PATH.tmp with the header of `tensors` (name, checkpoint shape) on
  // rank 0. True on every rank iff it worked.
  bool open(const std::string &path,
            const std::vector<SafetensorsWriter::Tensor> &tensors,
            const std::map<std::string, std::string> &metadata) {
    if (rank0_) {
      try {
        writer_ = std::make_unique<SafetensorsWriter>(path, tensors, metadata);
      } catch (const std::exception &e) {
        failure_ = e.what();
      }
    }
    return agree(ctx_, failure_);
  }

  // Gathers arg `arg` (its local buffers, all-gathered over TP for split
  // args) and writes it on rank 0, un-sliced with padding dropped, as the
  // next tensor of the file. A failure on rank 0 drops the file but the
  // gathering goes on; it is reported by agreeOk() / commit().
  void write(int arg) {
    const Arg &a = m_.args[arg];
    const int64_t n = a.localElements();
    buffers_.download(arg);
    const auto *local = static_cast<const float *>(buffers_.ptrs[arg]);
    const float *all = local; // rank r's slice at all + r*n
    int64_t ranks = 1;
    if (!a.splits.empty() && tp_ > 1) {
      // Flat local buffers, gathered in pieces whose counts fit in an int.
      ranks = tp_;
      gathered_.resize(static_cast<size_t>(tp_ * n));
      const int64_t piece = int64_t(1) << 26;
      for (int64_t off = 0; off < n; off += piece) {
        const int64_t c = std::min(piece, n - off);
        if (c == n) {
          rt.allGather(ctx_, MRT_AXIS_TP, local, gathered_.data(), n);
          break;
        }
        chunk_.resize(static_cast<size_t>(tp_ * c));
        rt.allGather(ctx_, MRT_AXIS_TP, local + off, chunk_.data(), c);
        for (int64_t r = 0; r < tp_; ++r)
          std::memcpy(gathered_.data() + r * n + off, chunk_.data() + r * c,
                      c * sizeof(float));
      }
      all = gathered_.data();
    }
    if (!rank0_ || !writer_)
      return;
    const int64_t count = numElements(a.checkpointShape);
    full_.assign(static_cast<size_t>(count), 0.0f);
    for (int64_t r = 0; r < ranks; ++r)
      unsliceTensor(a.slice(tp_, r), all + r * n, full_.data());
    try {
      writer_->write(full_.data(), count);
    } catch (const std::exception &e) {
      failure_ = e.what();
      writer_.reset(); // removes PATH.tmp; keep gathering with the others
    }
  }

  // True on every rank iff no rank failed so far.
  bool agreeOk() { return agree(ctx_, failure_); }

  // Finishes the file (fsync, rename). True on every rank iff it was
  // written completely.
  bool commit() {
    if (rank0_ && writer_) {
      try {
        writer_->commit();
      } catch (const std::exception &e) {
        failure_ = e.what();
      }
      writer_.reset();
    }
    return agree(ctx_, failure_);
  }

private:
  mrt_context *ctx_;
  const Manifest &m_;
  Buffers &buffers_;
  const int64_t tp_;
  const bool rank0_;
  std::unique_ptr<SafetensorsWriter> writer_; // rank 0 only
  std::string failure_;
  std::vector<float> gathered_, chunk_, full_;
};

// Writes the given args' global tensors as one safetensors file (collective;
// true on every rank iff the file was written).
struct SavedTensor {
  std::string name; // in the file
  int arg;          // index into the manifest's args
};

bool saveGlobal(mrt_context *ctx, const Manifest &m, Buffers &buffers,
                const std::string &path, const std::vector<SavedTensor> &list,
                const std::map<std::string, std::string> &metadata) {
  GlobalWriter out(ctx, m, buffers);
  std::vector<SafetensorsWriter::Tensor> tensors;
  for (const SavedTensor &t : list)
    tensors.push_back({t.name, m.args[t.arg].checkpointShape});
  if (!out.open(path, tensors, metadata))
    return false;
  for (const SavedTensor &t : list)
    out.write(t.arg);
  return out.commit();
}

int run(const Options &opt) {
  // --- the step library (identical on every rank: errors need no agreement)
  std::string libPath = opt.stepLibrary;
  if (libPath.find('/') == std::string::npos)
    libPath = "./" + libPath; // dlopen would search the library path
  void *lib = dlopen(libPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const std::string why = dlerror();
    // A CUDA step's runtime needs the NVIDIA driver, absent without a GPU;
    // a driver that is there but too old fails otherwise, with dlerror's
    // own words.
    if (why.find("libcuda.so") != std::string::npos &&
        why.find("cannot open shared object file") != std::string::npos)
      error(opt.stepLibrary + " was compiled for CUDA (--target=cuda) and "
                              "needs the NVIDIA driver (libcuda.so.1), which "
                              "this machine does not have: it has no usable "
                              "GPU (" + why + ")");
    else
      error("cannot load " + opt.stepLibrary + ": " + why);
    return 1;
  }
  auto manifestFn = reinterpret_cast<mgt_manifest_fn>(dlsym(lib, MGT_ENTRY_MANIFEST));
  auto forwardFn = reinterpret_cast<mgt_forward_fn>(dlsym(lib, MGT_ENTRY_FORWARD));
  auto trainFn = reinterpret_cast<mgt_train_step_fn>(dlsym(lib, MGT_ENTRY_TRAIN_STEP));
  if (!manifestFn || !forwardFn) {
    error(opt.stepLibrary + " does not export " +
          (manifestFn ? MGT_ENTRY_FORWARD : MGT_ENTRY_MANIFEST) +
          " (not a step library compiled by megatron-mlir?)");
    return 1;
  }
  const std::string missing = loadRuntimeApi(lib, rt);
  if (!missing.empty()) {
    error(opt.stepLibrary + " is not linked against a megatron runtime (no " +
          missing + ")");
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
  const bool train = !opt.evalOnly;
  if (train) {
    if (!trainFn) {
      error(opt.stepLibrary + " was compiled without --train; pass --eval-only");
      return 1;
    }
    if (!m.hasEntry(MGT_ENTRY_KIND_TRAIN_STEP)) {
      error(opt.stepLibrary + " exports mgt_train_step, but its manifest "
                              "does not list the entry \"train_step\"");
      return 1;
    }
    if (!opt.dumpGrads.empty() && !m.hasGrads()) {
      error("--dump-grads: " + opt.stepLibrary +
            " has no gradient outputs; compile with --export-grads");
      return 1;
    }
  }
  if (!opt.dumpLogits.empty() && m.logits < 0) {
    error("--dump-logits: " + opt.stepLibrary +
          " has no logits output; compile with --export-logits");
    return 1;
  }

  bool deviceArgs = false;
  for (const Arg &a : m.args)
    deviceArgs |= a.onDevice;
  if (deviceArgs && !rt.hasDeviceMemory()) {
    error(opt.stepLibrary + " keeps arguments in device memory, but its "
                            "runtime has no mrt_device_alloc");
    return 1;
  }

  // --- the context (every rank sees the same world size)
  char err[512];
  mrt_context *ctx = rt.contextCreate(m.tp, err, sizeof(err));
  if (!ctx) {
    if (m.target == "cuda")
      error(opt.stepLibrary + ": " + err);
    else
      error(opt.stepLibrary + " was compiled for tp=" + std::to_string(m.tp) +
            ": launch it as `mpirun -np " + std::to_string(m.tp) +
            " megatron-run ...` (" + err + ")");
    return 1;
  }
  const int64_t tpSize = rt.axisSize(ctx, MRT_AXIS_TP);
  const int64_t tpRank = rt.axisRank(ctx, MRT_AXIS_TP);
  const bool rank0 = rt.worldRank(ctx) == 0;
  const int64_t bt = m.batch * m.seq;

  // --- buffers, weights, data, log: any rank may fail; all agree first
  Buffers buffers(m);
  std::unique_ptr<TokenFile> data, valData;
  FILE *log = nullptr;
  std::string failure;
  int64_t localParams = 0;
  int64_t startStep = 0; // training: updates already done (--resume)
  try {
    buffers.allocate();
    std::unique_ptr<Checkpoint> ckpt;
    const std::string &weights = train && !opt.resume.empty() ? opt.resume
                                                               : opt.initFrom;
    const bool resume = train && !opt.resume.empty();
    if (!weights.empty()) {
      ckpt = std::make_unique<Checkpoint>(weights);
      ckpt->checkAgainst(m, resume);
    }
    if (resume) {
      auto it = ckpt->metadata().find("step");
      errno = 0;
      char *end = nullptr;
      const char *text = it == ckpt->metadata().end() ? "" : it->second.c_str();
      const long long k = std::strtoll(text, &end, 10);
      if (!*text || *end || errno || k < 0)
        throw std::runtime_error(
            "checkpoint " + weights + ": " +
            (it == ckpt->metadata().end()
                 ? std::string("no \"step\" in its __metadata__ (not written "
                               "by megatron-run --save?)")
                 : "bad \"step\" \"" + it->second + "\" in its __metadata__"));
      startStep = k;
      if (startStep >= opt.steps)
        throw std::runtime_error(
            "checkpoint " + weights + " is at step " +
            std::to_string(startStep) + ": nothing to do for --steps " +
            std::to_string(opt.steps) +
            " (--steps is the total number of steps, resumed ones included)");
    }
    for (size_t i = 0; i < m.args.size(); ++i) {
      const Arg &a = m.args[i];
      const bool isParam = a.role == MGT_ROLE_PARAM;
      const bool isState = a.role == MGT_ROLE_ADAM_M || a.role == MGT_ROLE_ADAM_V;
      if (!isParam && !(resume && isState))
        continue;
      const TensorSlice slice = a.slice(tpSize, tpRank);
      auto *out = static_cast<float *>(buffers.ptrs[i]);
      if (isState)
        ckpt->readSlice(Checkpoint::optimizerName(a.param, a.role), slice, out);
      else if (ckpt)
        ckpt->readSlice(a.name, slice, out);
      else
        initParam(a, slice, opt.seed, out);
      if (isParam)
        localParams += a.localElements();
    }
    // Opens a token file and validates the tokens that batches [0, steps)
    // use: indices [0, steps*B*T + 1) mod count.
    auto openTokens = [&](const std::string &path, int64_t steps) {
      auto file = std::make_unique<TokenFile>(path);
      const int64_t uses =
          steps > (INT64_MAX - 1) / bt ? INT64_MAX : steps * bt + 1;
      file->validate(m.batch, m.seq, m.validVocab, uses);
      return file;
    };
    data = openTokens(opt.data, opt.steps);
    if (train && !opt.valData.empty())
      valData = openTokens(opt.valData, opt.valSteps);
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
    rt.contextDestroy(ctx);
    return 1;
  }
  buffers.uploadAll();
  if (rank0) {
    std::string weights =
        !opt.initFrom.empty() ? "from " + opt.initFrom
        : train && !opt.resume.empty()
            ? "and optimizer state from " + opt.resume + " (step " +
                  std::to_string(startStep) + ")"
            : "the model's init, seed " + std::to_string(opt.seed);
    error(opt.stepLibrary + ": model " + m.model + ", tp " +
          std::to_string(m.tp) + ", batch " + std::to_string(m.batch) +
          ", seq " + std::to_string(m.seq) + ", " +
          std::to_string(localParams) + " parameters on rank 0; weights " +
          weights + "; data " + opt.data + " (" +
          std::to_string(data->count()) + " tokens)" +
          (train ? "; training steps " + std::to_string(startStep) + ".." +
                       std::to_string(opt.steps - 1)
                 : ""));
  }

  auto *inputs = static_cast<int32_t *>(buffers.ptrs[m.tokens]);
  auto *targets = static_cast<int32_t *>(buffers.ptrs[m.targets]);
  // Loads batch `index` of `file` on every rank; false (after agreement) if
  // any rank failed.
  auto loadBatch = [&](const TokenFile &file, int64_t index) {
    std::string why;
    try {
      file.batch(index, m.batch, m.seq, m.validVocab, inputs, targets);
    } catch (const std::exception &e) {
      why = e.what();
    }
    if (!agree(ctx, why))
      return false;
    buffers.upload(m.tokens);
    buffers.upload(m.targets);
    return true;
  };
  auto logLine = [&](const std::string &line) {
    if (!log)
      return;
    std::fputs(line.c_str(), log);
    std::fflush(log);
  };
  auto stepLine = [&](int64_t step, float loss, double ms) {
    return "{\"step\":" + std::to_string(step) +
           ",\"loss\":" + jsonNumber(loss, "%.9g") +
           ",\"ms\":" + jsonNumber(ms, "%.3f") + ",\"tokens_per_s\":" +
           jsonNumber(ms > 0 ? bt / (ms / 1000.0) : INFINITY, "%.1f");
  };
  int status = 0;

  if (!train) {
    // --dump-logits: one file, tensor "logits.<s>" = the global logits of
    // step s (checkpoint shape: padding columns dropped), streamed step by
    // step and renamed into place after the last one.
    std::unique_ptr<GlobalWriter> logitsOut;
    if (!opt.dumpLogits.empty()) {
      logitsOut = std::make_unique<GlobalWriter>(ctx, m, buffers);
      std::vector<SafetensorsWriter::Tensor> tensors;
      for (int64_t step = 0; step < opt.steps; ++step)
        tensors.push_back({"logits." + std::to_string(step),
                           m.args[m.logits].checkpointShape});
      if (!logitsOut->open(opt.dumpLogits, tensors,
                           {{"format", "megatron-mlir"},
                            {"content", "logits of mgt_forward; logits.<s> "
                                        "is step s (batch s)"},
                            {"model", m.model},
                            {"steps", std::to_string(opt.steps)}}))
        status = 1;
    }
    for (int64_t step = 0; status == 0 && step < opt.steps; ++step) {
      if (!loadBatch(*data, step)) {
        status = 1;
        break;
      }
      const auto t0 = std::chrono::steady_clock::now();
      const float loss = forwardFn(ctx, buffers.stepArgs());
      const auto t1 = std::chrono::steady_clock::now();
      if (rank0) {
        const double ms =
            std::chrono::duration<double, std::milli>(t1 - t0).count();
        std::printf("step %lld loss %.9g\n", static_cast<long long>(step),
                    loss);
        std::fflush(stdout);
        logLine(stepLine(step, loss, ms) + "}\n");
      }
      if (logitsOut) {
        logitsOut->write(m.logits);
        if (!logitsOut->agreeOk()) {
          status = 1;
          break;
        }
      }
    }
    if (status == 0 && logitsOut) {
      if (!logitsOut->commit())
        status = 1;
      else if (rank0)
        error("wrote the logits of " + std::to_string(opt.steps) +
              " step(s) to " + opt.dumpLogits);
    }
  } else {
    // Validation: the mean mgt_forward loss over batches 0..M-1 of the
    // validation file, with the weights after `updates` updates. The training
    // batch buffers are restored afterwards.
    // Each training step loads its own batch, so evaluation may overwrite it.
    auto validate = [&](int64_t updates) {
      double sum = 0.0;
      for (int64_t b = 0; b < opt.valSteps; ++b) {
        if (!loadBatch(*valData, b))
          return false;
        sum += forwardFn(ctx, buffers.stepArgs());
      }
      const float loss = static_cast<float>(sum / opt.valSteps);
      if (rank0) {
        std::printf("val step %lld loss %.9g\n",
                    static_cast<long long>(updates), loss);
        std::fflush(stdout);
        logLine("{\"step\":" + std::to_string(updates) +
                ",\"val_loss\":" + jsonNumber(loss, "%.9g") + "}\n");
      }
      return true;
    };
    auto *hp = static_cast<float *>(buffers.ptrs[m.hyperparameters]);
    for (int64_t step = startStep; step < opt.steps; ++step) {
      if (!loadBatch(*data, step)) {
        status = 1;
        break;
      }
      const float lr = static_cast<float>(learningRate(opt, step));
      float h[MGT_HP_COUNT] = {};
      h[MGT_HP_LR] = lr;
      h[MGT_HP_BETA1] = static_cast<float>(opt.beta1);
      h[MGT_HP_BETA2] = static_cast<float>(opt.beta2);
      h[MGT_HP_EPS] = static_cast<float>(opt.eps);
      h[MGT_HP_WEIGHT_DECAY] = static_cast<float>(opt.weightDecay);
      h[MGT_HP_GRAD_CLIP] = static_cast<float>(opt.gradClip);
      h[MGT_HP_STEP] = static_cast<float>(step + 1);
      std::memcpy(hp, h, sizeof(h));
      float results[MGT_TRAIN_RESULT_COUNT] = {NAN, NAN};
      const auto t0 = std::chrono::steady_clock::now();
      trainFn(ctx, buffers.stepArgs(), results);
      const auto t1 = std::chrono::steady_clock::now();
      if (rank0) {
        const double ms =
            std::chrono::duration<double, std::milli>(t1 - t0).count();
        std::printf("step %lld loss %.9g grad_norm %.9g lr %.9g ms %.3f\n",
                    static_cast<long long>(step), results[MGT_TRAIN_RESULT_LOSS], results[MGT_TRAIN_RESULT_GRAD_NORM], lr,
                    ms);
        std::fflush(stdout);
        logLine(stepLine(step, results[MGT_TRAIN_RESULT_LOSS], ms) +
                ",\"grad_norm\":" + jsonNumber(results[MGT_TRAIN_RESULT_GRAD_NORM], "%.9g") +
                ",\"lr\":" + jsonNumber(lr, "%.9g") + "}\n");
      }
      if (!opt.dumpGrads.empty() && step == startStep) {
        std::vector<SavedTensor> grads;
        for (size_t i = 0; i < m.args.size(); ++i)
          if (m.args[i].role == MGT_ROLE_PARAM)
            grads.push_back({m.args[i].name, m.args[i].grad});
        if (!saveGlobal(ctx, m, buffers, opt.dumpGrads, grads,
                        {{"format", "megatron-mlir"},
                         {"content", "gradients (unclipped) of the loss"},
                         {"step", std::to_string(step)}})) {
          status = 1;
          break;
        }
      }
      const int64_t updates = step + 1;
      if (valData && ((opt.valEvery > 0 && updates % opt.valEvery == 0) ||
                      updates == opt.steps) &&
          !validate(updates)) {
        status = 1;
        break;
      }
    }
    if (status == 0 && !opt.save.empty()) {
      std::vector<SavedTensor> list;
      for (size_t i = 0; i < m.args.size(); ++i)
        if (m.args[i].role == MGT_ROLE_PARAM)
          list.push_back({m.args[i].name, static_cast<int>(i)});
      for (size_t i = 0; i < m.args.size(); ++i)
        if (m.args[i].role == MGT_ROLE_PARAM) {
          const Arg &a = m.args[i];
          list.push_back({Checkpoint::optimizerName(a.name, MGT_ROLE_ADAM_M), a.adamM});
          list.push_back({Checkpoint::optimizerName(a.name, MGT_ROLE_ADAM_V), a.adamV});
        }
      const std::map<std::string, std::string> meta = {
          {"format", "megatron-mlir"},
          {"step", std::to_string(opt.steps)},
          {"model", m.model},
          {"lr", number(opt.lr)},
          {"beta1", number(opt.beta1)},
          {"beta2", number(opt.beta2)},
          {"eps", number(opt.eps)},
          {"weight_decay", number(opt.weightDecay)},
          {"grad_clip", number(opt.gradClip)},
          {"lr_schedule", opt.lrSchedule},
          {"warmup_steps", std::to_string(opt.warmupSteps)},
          {"min_lr", number(opt.minLr)},
          {"steps", std::to_string(opt.steps)}};
      if (!saveGlobal(ctx, m, buffers, opt.save, list, meta))
        status = 1;
      else if (rank0)
        error("saved " + opt.save + " (step " + std::to_string(opt.steps) +
              ")");
    }
  }
  if (log && std::fclose(log) != 0 && status == 0) {
    error("cannot write log " + opt.log + ": " + std::strerror(errno));
    status = 1;
  }
  rt.contextDestroy(ctx);
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
