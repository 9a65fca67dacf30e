#include "Validation.h"

#include "Report.h"

namespace mrun {

bool validationDue(const Options &opt, int64_t updates) {
  return (opt.valEvery > 0 && updates % opt.valEvery == 0) ||
         updates == opt.steps;
}

std::optional<float>
meanLoss(int64_t batches,
         const std::function<std::optional<float>(int64_t)> &lossOf) {
  double sum = 0.0;
  for (int64_t b = 0; b < batches; ++b) {
    const std::optional<float> loss = lossOf(b);
    if (!loss)
      return std::nullopt;
    sum += *loss;
  }
  return static_cast<float>(sum / batches);
}

bool validate(Session &s, int64_t updates) {
  const std::optional<float> loss =
      meanLoss(s.opt.valSteps, [&](int64_t b) -> std::optional<float> {
        if (!s.loadBatch(*s.valData, b))
          return std::nullopt;
        return s.step.forward(s.mesh.context(), s.buffers.stepArgs());
      });
  if (!loss)
    return false;
  s.console->print(validationLine(updates, *loss));
  if (s.mesh.rank0())
    s.log.write(validationLogLine(updates, *loss));
  return true;
}

} // namespace mrun
