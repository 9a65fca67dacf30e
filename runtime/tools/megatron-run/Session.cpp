#include "Session.h"

#include "Checkpoint.h"
#include "CheckpointDir.h"
#include "Init.h"
#include "Slicing.h"

#include "megatron_rt/api.h"

#include <cerrno>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <utility>
#include <vector>

namespace mrun {
namespace {

// The checkpoint the weights come from (null: the model's init rules), its
// tensors checked against the manifest.
std::unique_ptr<Checkpoint> openCheckpoint(const Options &opt,
                                           const Manifest &m) {
  if (!resumes(opt) && opt.initFrom.empty())
    return nullptr;
  const std::string path =
      resumes(opt) ? resumeFile(opt.resume) : opt.initFrom;
  auto ckpt = std::make_unique<Checkpoint>(path, m.checkpointNames);
  ckpt->checkAgainst(m, resumes(opt));
  return ckpt;
}

// `slice` of parameter `param`'s fp32 values: from `ckpt`, or without one
// from the model's init rule.
void readParam(const Session &s, const Checkpoint *ckpt, const Arg &param,
               const TensorSlice &slice, float *out) {
  if (ckpt)
    ckpt->readSlice(param.name, slice, out);
  else
    initParam(param, slice, s.opt.seed, out);
}

// Fills this rank's parameter slices from `ckpt`, or without one from the
// model's init rules (a bf16 param its rounding, its master the fp32 rows),
// and when resuming the AdamW state too (everything else stays zero).
// Returns the number of parameter elements on this rank.
int64_t loadWeights(Session &s, const Checkpoint *ckpt) {
  int64_t localParams = 0;
  for (size_t i = 0; i < s.m.args.size(); ++i) {
    const Arg &a = s.m.args[i];
    auto *out = s.buffers.host<float>(static_cast<int>(i));
    if (a.role == MGT_ROLE_PARAM) {
      const TensorSlice slice = a.slice(s.mesh.tpSize(), s.mesh.tpRank());
      if (a.dtype == MGT_DTYPE_BF16) {
        std::vector<float> values(static_cast<size_t>(a.localElements()));
        readParam(s, ckpt, a, slice, values.data());
        auto *stored = s.buffers.host<mrt_bf16>(static_cast<int>(i));
        for (size_t k = 0; k < values.size(); ++k)
          stored[k] = mrt_bf16_round(values[k]);
      } else {
        readParam(s, ckpt, a, slice, out);
      }
      localParams += a.localElements();
    } else if (a.role == MGT_ROLE_MASTER) {
      readParam(s, ckpt, s.m.args[a.paramIndex],
                a.slice(s.mesh.tpSize(), s.mesh.tpRank(), s.mesh.dpSize(),
                        s.mesh.dpRank()),
                out);
    } else if (a.isAdamState() && resumes(s.opt)) {
      ckpt->readSlice(Checkpoint::optimizerName(a.param, a.role),
                      a.slice(s.mesh.tpSize(), s.mesh.tpRank(),
                              s.mesh.dpSize(), s.mesh.dpRank()),
                      out);
    }
  }
  return localParams;
}

// Opens a token file and validates the tokens that batches [0, steps) use.
std::unique_ptr<TokenFile> openTokens(const std::string &path,
                                      const Manifest &m, int64_t steps) {
  auto file = std::make_unique<TokenFile>(path);
  file->validate(m.batch, m.seq, m.validVocab,
                 tokensUsed(steps, m.batch, m.seq));
  return file;
}

// This rank's share of prepare(); throws on failure. Returns the number of
// parameter elements on this rank.
int64_t loadState(Session &s) {
  s.buffers.allocate();
  const std::unique_ptr<Checkpoint> ckpt = openCheckpoint(s.opt, s.m);
  if (resumes(s.opt)) {
    s.startStep = resumeStep(ckpt->metadata(), ckpt->path(), s.opt.steps);
    s.skippedUpdates =
        resumeSkipped(ckpt->metadata(), ckpt->path(), s.startStep);
  }
  if (s.opt.saveEvery > 0)
    checkSaveDirectory(s.opt.saveDir, s.startStep);
  // Rank 0 writes the files at the end of the run: refuse now, not then.
  if (s.mesh.rank0())
    for (const std::string *file : {&s.opt.save, &s.opt.dumpGrads})
      if (!file->empty())
        SafetensorsWriter::checkWritable(*file);
  const int64_t localParams = loadWeights(s, ckpt.get());
  if (s.opt.generate)
    return localParams;
  s.peakFlops =
      peakFlops(s.opt, s.m, s.mesh.dpSize() * s.mesh.tpSize(), s.cpus);
  s.data = openTokens(s.opt.data, s.m, s.opt.steps);
  if (!s.opt.evalOnly && !s.opt.valData.empty())
    s.valData = openTokens(s.opt.valData, s.m, s.opt.valSteps);
  if (s.mesh.rank0() && !s.opt.log.empty())
    s.log.open(s.opt.log);
  return localParams;
}

// Where the weights come from, for runSummary().
std::string weightsSource(const Options &opt, int64_t startStep) {
  if (!opt.initFrom.empty())
    return "from " + opt.initFrom;
  if (resumes(opt))
    return "and optimizer state from " + opt.resume + " (step " +
           std::to_string(startStep) + ")";
  return "the model's init, seed " + std::to_string(opt.seed);
}

} // namespace

bool Session::loadBatch(const TokenFile &file, int64_t index) {
  std::string failure;
  try {
    // The step's global batch, of which this rank keeps its dp rows.
    std::vector<int32_t> tokens(m.batch * m.seq), targets(m.batch * m.seq);
    file.batch(index, m.batch, m.seq, m.validVocab, tokens.data(),
               targets.data());
    for (auto [arg, global] : {std::pair{m.tokens, &tokens},
                               std::pair{m.targets, &targets}})
      sliceTensor(m.args[arg].slice(mesh.tpSize(), mesh.tpRank(),
                                    mesh.dpSize(), mesh.dpRank()),
                  global->data(), buffers.host<int32_t>(arg));
  } catch (const std::exception &e) {
    failure = e.what();
  }
  if (!mesh.agree(failure))
    return false;
  buffers.upload(m.tokens);
  buffers.upload(m.targets);
  return true;
}

bool prepare(Session &s) {
  const Mesh::UnboundedWait loading(s.mesh);
  std::string failure;
  int64_t localParams = 0;
  try {
    localParams = loadState(s);
  } catch (const std::exception &e) {
    failure = e.what();
  }
  if (!s.mesh.agree(failure))
    return false;
  // Every rank resolved --resume itself: a directory another process was
  // writing into could give them different checkpoints.
  if (!s.mesh.agree(s.mesh.sameOnEveryRank(s.startStep)
                        ? ""
                        : "the ranks resumed at different steps (this one at " +
                              std::to_string(s.startStep) +
                              "): --resume read different checkpoints; name "
                              "one file"))
    return false;
  s.buffers.uploadAll();
  if (s.mesh.rank0())
    report(runSummary(s.opt, s.m, localParams, s.data ? s.data->count() : 0,
                      s.startStep));
  return true;
}

bool resumes(const Options &opt) {
  return !opt.evalOnly && !opt.resume.empty();
}

namespace {

/// The non-negative count `key` of a checkpoint's metadata; -1 when absent.
int64_t metadataCount(const std::map<std::string, std::string> &metadata,
                      const std::string &key, const std::string &file) {
  const auto it = metadata.find(key);
  if (it == metadata.end())
    return -1;
  const char *text = it->second.c_str();
  errno = 0;
  char *end = nullptr;
  const long long k = std::strtoll(text, &end, 10);
  if (!*text || *end || errno || k < 0)
    throw std::runtime_error("checkpoint " + file + ": bad \"" + key +
                             "\" \"" + it->second + "\" in its __metadata__");
  return k;
}

} // namespace

int64_t resumeStep(const std::map<std::string, std::string> &metadata,
                   const std::string &file, int64_t steps) {
  const int64_t k = metadataCount(metadata, "step", file);
  if (k < 0)
    throw std::runtime_error("checkpoint " + file +
                             ": no \"step\" in its __metadata__ (not written "
                             "by megatron-run --save?)");
  if (k >= steps)
    throw std::runtime_error(
        "checkpoint " + file + " is at step " + std::to_string(k) +
        ": nothing to do for --steps " + std::to_string(steps) +
        " (--steps is the total number of steps, resumed ones included)");
  return k;
}

int64_t resumeSkipped(const std::map<std::string, std::string> &metadata,
                      const std::string &file, int64_t step) {
  const int64_t k = metadataCount(metadata, "skipped_updates", file);
  if (k > step)
    throw std::runtime_error("checkpoint " + file + ": \"skipped_updates\" " +
                             std::to_string(k) + " exceeds its \"step\" " +
                             std::to_string(step));
  return std::max<int64_t>(k, 0);
}

std::string runSummary(const Options &opt, const Manifest &m,
                       int64_t rank0Params, int64_t dataTokens,
                       int64_t startStep) {
  std::string summary =
      opt.stepLibrary + ": model " + m.model +
      (m.dp > 1 ? ", dp " + std::to_string(m.dp) : "") + ", tp " +
      std::to_string(m.tp) +
      ", batch " + std::to_string(m.batch) + ", seq " + std::to_string(m.seq) +
      ", " + std::to_string(rank0Params) + " parameters on rank 0; weights " +
      weightsSource(opt, startStep);
  if (opt.generate)
    return summary + "; KV cache of " + std::to_string(m.ctx) +
           " positions; up to " + std::to_string(opt.maxNew) +
           " new tokens per prompt";
  summary += "; data " + opt.data + " (" + std::to_string(dataTokens) +
             " tokens)";
  if (!opt.evalOnly)
    summary += "; training steps " + std::to_string(startStep) + ".." +
               std::to_string(opt.steps - 1);
  return summary;
}

} // namespace mrun
