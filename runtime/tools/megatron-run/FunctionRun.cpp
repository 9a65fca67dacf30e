#include "FunctionRun.h"

#include "Checkpoint.h"
#include "GlobalWriter.h"
#include "Report.h"

#include <exception>

namespace mrun {
namespace {

// Reads this rank's slice of every input; throws naming the file.
void readInputs(Session &s) {
  s.buffers.allocate();
  const Checkpoint inputs(s.opt.inputs, s.m.checkpointNames);
  inputs.checkAgainst(s.m);
  for (size_t i = 0; i < s.m.args.size(); ++i) {
    const Arg &a = s.m.args[i];
    if (a.role == MGT_ROLE_INPUT)
      inputs.readSlice(a,
                       a.slice(s.mesh.tpSize(), s.mesh.tpRank(),
                               s.mesh.dpSize(), s.mesh.dpRank()),
                       s.buffers.host<float>(static_cast<int>(i)));
  }
}

std::vector<SavedTensor> outputTensors(const Manifest &m) {
  std::vector<SavedTensor> outputs;
  for (size_t i = 0; i < m.args.size(); ++i)
    if (m.args[i].role == MGT_ROLE_OUTPUT)
      outputs.push_back({m.args[i].name, static_cast<int>(i)});
  return outputs;
}

} // namespace

bool runFunction(Session &s) {
  {
    const Mesh::UnboundedWait loading(s.mesh);
    std::string failure;
    try {
      readInputs(s);
    } catch (const std::exception &e) {
      failure = e.what();
    }
    if (!s.mesh.agree(failure))
      return false;
  }
  s.buffers.uploadAll();
  s.step.function(s.mesh.context(), s.buffers.stepArgs());
  const std::vector<SavedTensor> outputs = outputTensors(s.m);
  if (!saveGlobal(s.mesh, s.m, s.buffers, s.opt.outputs, outputs, {},
                  Values::Any))
    return false;
  if (s.mesh.rank0())
    report("wrote " + std::to_string(outputs.size()) + " outputs of " +
           s.m.model + " to " + s.opt.outputs);
  return true;
}

} // namespace mrun
