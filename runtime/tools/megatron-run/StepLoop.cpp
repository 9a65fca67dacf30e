#include "StepLoop.h"

#include "GlobalWriter.h"
#include "Report.h"
#include "Save.h"
#include "Validation.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

namespace mrun {
namespace {

// The wall time of fn() in milliseconds: the step entry alone, without the
// batch loading or the reporting around it.
template <typename Fn> double millisecondsOf(Fn &&fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

int64_t batchTokens(const Manifest &m) { return m.batch * m.seq; }

// The console of steps [first, --steps) of `entry`, whose FLOPs every rank
// runs.
std::unique_ptr<Console> makeConsole(const Session &s, int64_t first,
                                     const char *entry) {
  const double ranks =
      static_cast<double>(s.mesh.dpSize() * s.mesh.tpSize());
  return std::make_unique<Console>(first, s.opt.steps, batchTokens(s.m),
                                   s.m.flopsOf(entry) * ranks, s.peakFlops,
                                   s.mesh.rank0());
}

// Collective: the --dump-logits file, created before step 0 so that an
// unwritable path fails before any step runs. Null on every rank if it
// failed.
std::unique_ptr<GlobalWriter> openLogitsFile(Session &s) {
  auto out = std::make_unique<GlobalWriter>(s.mesh, s.m, s.buffers);
  if (!out->open(s.opt.dumpLogits, logitsTensors(s.m, s.opt.steps),
                 logitsMetadata(s.m, s.opt.steps), Values::Any))
    return nullptr;
  return out;
}

// Collective: forward step `step` on batch `step`, its loss added to
// `lossSum`; its logits to `logits` when given.
bool evalStep(Session &s, int64_t step, GlobalWriter *logits,
              double &lossSum) {
  if (!s.loadBatch(*s.data, step))
    return false;
  float loss = 0.0f;
  const double ms = millisecondsOf(
      [&] { loss = s.step.forward(s.mesh.context(), s.buffers.stepArgs()); });
  lossSum += loss;
  s.console->printStep(step, evalStepLine(step, loss));
  if (s.mesh.rank0())
    s.log.write(evalLogLine(step, loss, ms, batchTokens(s.m)));
  if (!logits)
    return true;
  logits->write(s.m.logits);
  return logits->agreeOk();
}

// Collective: training step `step` on batch `step`, then what follows it
// (--dump-grads, validation, a periodic checkpoint).
bool trainStep(Session &s, int64_t step) {
  if (!s.loadBatch(*s.data, step))
    return false;
  const std::array<float, MGT_HP_COUNT> hp =
      hyperparameters(s.opt, step, s.skippedUpdates);
  std::memcpy(s.buffers.host<float>(s.m.hyperparameters), hp.data(),
              sizeof(hp));
  float results[MGT_TRAIN_RESULT_COUNT] = {NAN, NAN};
  const double waitedBefore = s.mesh.exposedCommSeconds();
  const double ms = millisecondsOf([&] {
    s.step.trainStep(s.mesh.context(), s.buffers.stepArgs(), results);
  });
  const double exposedCommMs =
      (s.mesh.exposedCommSeconds() - waitedBefore) * 1e3;
  const float loss = results[MGT_TRAIN_RESULT_LOSS];
  const float gradNorm = results[MGT_TRAIN_RESULT_GRAD_NORM];
  std::string line = trainStepLine(step, loss, gradNorm, hp[MGT_HP_LR], ms);
  line.insert(line.size() - 1, s.console->rates(step, ms));
  s.console->printStep(step, line);
  if (s.mesh.rank0())
    s.log.write(trainLogLine(step, loss, gradNorm, hp[MGT_HP_LR], ms,
                             batchTokens(s.m), s.console->mfu(ms),
                             exposedCommMs));
  // The loss and the norm are reduced over the mesh: every rank sees the
  // same values and stops (or skips) at the same step. The step applied no
  // update, so the weights are those before it.
  if (!std::isfinite(loss) || !std::isfinite(gradNorm)) {
    if (!s.opt.skipNonFinite)
      return s.mesh.agree(nonFiniteStep(step, loss, gradNorm, false));
    ++s.skippedUpdates;
    if (s.mesh.rank0())
      report(nonFiniteStep(step, loss, gradNorm, true, s.skippedUpdates));
  }
  if (!s.opt.dumpGrads.empty() && step == s.startStep &&
      !dumpGradients(s, step))
    return false;
  const int64_t updates = step + 1;
  if (s.valData && validationDue(s.opt, updates) && !validate(s, updates))
    return false;
  return !periodicSaveDue(s.opt, updates) ||
         savePeriodicCheckpoint(s, updates);
}

} // namespace

std::string nonFiniteStep(int64_t step, float loss, float gradNorm, bool skip,
                          int64_t skipped) {
  if (std::isfinite(loss) && std::isfinite(gradNorm))
    return "";
  auto text = [](float v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    return std::string(buf);
  };
  const std::string fault = "step " + std::to_string(step) +
                            ": the loss is " + text(loss) +
                            " and the gradient norm " + text(gradNorm);
  if (skip)
    return fault + ": its update is skipped (" + std::to_string(skipped) +
           " skipped so far)";
  return fault + ": training stops, and nothing is saved (the step applied "
                 "no update; --on-nonfinite skip goes on without it)";
}

bool evaluate(Session &s) {
  s.console = makeConsole(s, 0, MGT_ENTRY_KIND_FORWARD);
  std::unique_ptr<GlobalWriter> logits;
  if (!s.opt.dumpLogits.empty()) {
    logits = openLogitsFile(s);
    if (!logits)
      return false;
  }
  double lossSum = 0;
  for (int64_t step = 0; step < s.opt.steps; ++step)
    if (!evalStep(s, step, logits.get(), lossSum))
      return false;
  s.console->print(evalMeanLine(lossSum / s.opt.steps, s.opt.steps));
  if (!logits)
    return true;
  if (!logits->commit())
    return false;
  if (s.mesh.rank0())
    report("wrote the logits of " + std::to_string(s.opt.steps) +
           " step(s) to " + s.opt.dumpLogits);
  return true;
}

bool train(Session &s) {
  s.console = makeConsole(s, s.startStep, MGT_ENTRY_KIND_TRAIN_STEP);
  for (int64_t step = s.startStep; step < s.opt.steps; ++step)
    if (!trainStep(s, step))
      return false;
  return true;
}

std::array<float, MGT_HP_COUNT> hyperparameters(const Options &opt,
                                                int64_t step,
                                                int64_t skipped) {
  std::array<float, MGT_HP_COUNT> hp = {};
  hp[MGT_HP_LR] = static_cast<float>(learningRate(opt, step));
  hp[MGT_HP_BETA1] = static_cast<float>(opt.beta1);
  hp[MGT_HP_BETA2] = static_cast<float>(opt.beta2);
  hp[MGT_HP_EPS] = static_cast<float>(opt.eps);
  hp[MGT_HP_WEIGHT_DECAY] = static_cast<float>(opt.weightDecay);
  hp[MGT_HP_GRAD_CLIP] = static_cast<float>(opt.gradClip);
  hp[MGT_HP_STEP] = static_cast<float>(step + 1 - skipped);
  // A float holds integers below 2^24 exactly: the seed's low 24 bits.
  hp[MGT_HP_DROPOUT_SEED] = static_cast<float>(opt.seed & 0xFFFFFF);
  return hp;
}

} // namespace mrun
