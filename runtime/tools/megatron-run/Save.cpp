#include "Save.h"

#include "CheckpointDir.h"
#include "Report.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace mrun {
namespace {

// The shortest %g form that reads back as v.
std::string shortestNumber(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

} // namespace

std::vector<SavedTensor> checkpointTensors(const Manifest &m) {
  std::vector<SavedTensor> list;
  // A bf16 param's fp32 values are its master's rows, gathered.
  for (size_t i = 0; i < m.args.size(); ++i)
    if (m.args[i].role == MGT_ROLE_PARAM)
      list.push_back({m.args[i].name, m.args[i].master >= 0
                                          ? m.args[i].master
                                          : static_cast<int>(i)});
  for (const Arg &a : m.args)
    if (a.role == MGT_ROLE_PARAM) {
      list.push_back(
          {Checkpoint::optimizerName(a.name, MGT_ROLE_ADAM_M), a.adamM});
      list.push_back(
          {Checkpoint::optimizerName(a.name, MGT_ROLE_ADAM_V), a.adamV});
    }
  return list;
}

Metadata checkpointMetadata(const Options &opt, const Manifest &m,
                            int64_t updates, int64_t skipped) {
  return {{"format", kCheckpointFormat},
          {"step", std::to_string(updates)},
          {"skipped_updates", std::to_string(skipped)},
          {"model", m.model},
          {"lr", shortestNumber(opt.lr)},
          {"beta1", shortestNumber(opt.beta1)},
          {"beta2", shortestNumber(opt.beta2)},
          {"eps", shortestNumber(opt.eps)},
          {"weight_decay", shortestNumber(opt.weightDecay)},
          {"grad_clip", shortestNumber(opt.gradClip)},
          {"lr_schedule", opt.lrSchedule},
          {"warmup_steps", std::to_string(opt.warmupSteps)},
          {"min_lr", shortestNumber(opt.minLr)},
          {"steps", std::to_string(opt.steps)}};
}

std::vector<SavedTensor> gradientTensors(const Manifest &m) {
  std::vector<SavedTensor> list;
  for (const Arg &a : m.args)
    if (a.role == MGT_ROLE_PARAM)
      list.push_back({a.name, a.grad});
  return list;
}

Metadata gradientMetadata(int64_t step) {
  return {{"format", kCheckpointFormat},
          {"content", "gradients (unclipped) of the loss"},
          {"step", std::to_string(step)}};
}

std::vector<SafetensorsWriter::Tensor> logitsTensors(const Manifest &m,
                                                     int64_t steps) {
  std::vector<SafetensorsWriter::Tensor> tensors;
  for (int64_t step = 0; step < steps; ++step)
    tensors.push_back(
        {"logits." + std::to_string(step), m.args[m.logits].checkpointShape});
  return tensors;
}

Metadata logitsMetadata(const Manifest &m, int64_t steps) {
  return {{"format", kCheckpointFormat},
          {"content", "logits of mgt_forward; logits.<s> is step s (batch s)"},
          {"model", m.model},
          {"steps", std::to_string(steps)}};
}

bool saveCheckpoint(Session &s) {
  if (!saveGlobal(s.mesh, s.m, s.buffers, s.opt.save, checkpointTensors(s.m),
                  checkpointMetadata(s.opt, s.m, s.opt.steps, s.skippedUpdates),
                  Values::Finite))
    return false;
  if (s.mesh.rank0())
    report("saved " + s.opt.save + " (step " + std::to_string(s.opt.steps) +
           ")");
  return true;
}

bool periodicSaveDue(const Options &opt, int64_t updates) {
  return opt.saveEvery > 0 && updates % opt.saveEvery == 0;
}

bool savePeriodicCheckpoint(Session &s, int64_t updates) {
  const Mesh::UnboundedWait saving(s.mesh);
  const std::string path = checkpointInDir(s.opt.saveDir, updates);
  if (!saveGlobal(s.mesh, s.m, s.buffers, path, checkpointTensors(s.m),
                  checkpointMetadata(s.opt, s.m, updates, s.skippedUpdates),
                  Values::Finite))
    return false;
  std::string failure;
  if (s.mesh.rank0()) {
    try {
      keepLatest(s.opt.saveDir, s.opt.keepLast);
    } catch (const std::exception &e) {
      failure = e.what();
    }
  }
  if (!s.mesh.agree(failure))
    return false;
  if (s.mesh.rank0())
    report("saved " + path);
  return true;
}

bool dumpGradients(Session &s, int64_t step) {
  return saveGlobal(s.mesh, s.m, s.buffers, s.opt.dumpGrads,
                    gradientTensors(s.m), gradientMetadata(step), Values::Any);
}

} // namespace mrun
