//===- Explain.cpp - parameters, FLOPs and communication per rank ---------===//
#include "megatron/Analysis/Passes.h"
#include "megatron/Dialect/TP/Utils/LayerLocations.h"
#include "megatron/Dialect/TP/Utils/Utils.h"
#include "megatron_rt/contract.h"
#include "megatron/Analysis/PerformanceModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <map>

namespace mlir::megatron {
#define GEN_PASS_DEF_EXPLAIN
#include "megatron/Analysis/Passes.h.inc"
} // namespace mlir::megatron

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

namespace {

int64_t numElements(Type type) {
  return cast<RankedTensorType>(type).getNumElements();
}

struct Gemm {
  std::string name;
  int64_t batch, m, n, k;
};

struct Report {
  int64_t tp = 1, dp = 1;
  int64_t paramsTotal = 0, paramsPerRank = 0;
  /// Of paramsTotal, the rows tp-megatron-annotate added to a vocabulary tp
  /// does not divide: the model's own count is paramsTotal - paramsPadding.
  int64_t paramsPadding = 0;
  /// Bytes this rank holds: the parameters as stored, their fp32 gradients,
  /// the AdamW moments (once tp-optimizer added them), the activations the
  /// backward pass reads (one micro-batch's; with tp-recompute-layers, each
  /// layer's input and the largest layer's recomputed ones).
  int64_t paramBytes = 0, gradientBytes = 0, optimizerBytes = 0,
          activationBytes = 0;
  /// Bytes of the tensors this rank's collectives cover, per mesh axis.
  std::map<std::string, int64_t> commBytesByAxis;
  /// The ranks of each mesh axis and sub-axis: the size of each group a
  /// collective over it runs in.
  std::map<std::string, int64_t> axisRanks;
  /// The recomputed forward (tp-recompute-layers) apart from the model's.
  int64_t forwardFlops = 0, recomputeFlops = 0, backwardFlops = 0;
  int64_t fCount = 0, gCount = 0;
  /// (kind, direction, elements, axis) -> count
  using CollectiveKey =
      std::tuple<std::string, std::string, int64_t, std::string>;
  std::map<CollectiveKey, int64_t> collectives;
  /// Of those, the started ones (tp-overlap-collectives) and the FLOPs of
  /// the GEMMs that run between their start and their wait.
  struct Overlap {
    int64_t started = 0, flops = 0;
  };
  std::map<CollectiveKey, Overlap> overlapped;
  std::map<int64_t, std::vector<Gemm>> layers;
  std::optional<Hardware> hardware;
  StepTime predicted;

  int64_t commElements() const {
    int64_t total = 0;
    for (const auto &[key, count] : collectives)
      total += std::get<2>(key) * count;
    return total;
  }
};

void countParameters(func::FuncOp function, Report &report) {
  for (BlockArgument arg : function.getArguments()) {
    ArgumentRole role = getArgumentKind(function, arg.getArgNumber()).role;
    if (role == ArgumentRole::AdamM || role == ArgumentRole::AdamV ||
        role == ArgumentRole::Master)
      report.optimizerBytes += getNumBytes(arg.getType());
    auto name = function.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      TPDialect::kNameAttrName);
    if (!name || !isParameter(function, arg.getArgNumber()))
      continue;
    int64_t local = numElements(arg.getType());
    report.paramBytes += getNumBytes(arg.getType());
    report.gradientBytes += local * 4;
    int64_t global = local;
    if (auto shape = function.getArgAttrOfType<DenseI64ArrayAttr>(
            arg.getArgNumber(), TPDialect::kGlobalShapeAttrName))
      global = ShapedType::getNumElements(shape.asArrayRef());
    report.paramsTotal += global;
    report.paramsPerRank += local;
    if (auto unpadded = function.getArgAttrOfType<DenseI64ArrayAttr>(
            arg.getArgNumber(), TPDialect::kUnpaddedShapeAttrName))
      report.paramsPadding +=
          global - ShapedType::getNumElements(unpadded.asArrayRef());
  }
}

Gemm describeGemm(MatmulOp matmul) {
  auto lhs = matmul.getLhs().getType().getShape();
  auto result = matmul.getType().getShape();
  int64_t k = matmul.getTransposeLhs() ? lhs.end()[-2] : lhs.back();
  int64_t batch = 1;
  for (int64_t size : result.drop_back(2))
    batch *= size;
  return {getModuleName(matmul.getLoc()).str(), batch, result.end()[-2],
          result.back(), k};
}

bool isBackward(Operation *op) { return getPhase(op) == "backward"; }

/// A forward value the backward pass reads stays alive between them; in a
/// micro-batch loop, one micro-batch's at a time. A recomputed one lives
/// through its layer's backward only: one layer's at a time, the largest
/// counted (`recomputedPeak`). Constants, f of a parameter (the parameter
/// itself) and a loop's carried sums are not activations; f of an
/// activation (a norm's output entering a column-parallel GEMM) is.
void countActivations(Operation *op, Report &report,
                      std::map<int64_t, int64_t> &recomputedByLayer) {
  bool recomputed = isRecomputed(op);
  if ((!recomputed && getPhase(op) != "forward") ||
      op->hasTrait<OpTrait::ConstantLike>() ||
      (isa<FOp>(op) && isa<BlockArgument>(op->getOperand(0))) ||
      op->getNumRegions() > 0)
    return;
  // A layer's input is read again by its recomputed forward.
  auto readLater = [&](Operation *user) {
    return isBackward(user) || (!recomputed && isRecomputed(user));
  };
  for (Value result : op->getResults()) {
    if (!isa<RankedTensorType>(result.getType()) ||
        llvm::none_of(result.getUsers(), readLater))
      continue;
    int64_t bytes = getNumBytes(result.getType());
    if (!recomputed)
      report.activationBytes += bytes;
    else
      recomputedByLayer[getLayer(op->getLoc()).value_or(-1)] += bytes;
  }
}

void countCompute(Operation *op, Report &report) {
  (isBackward(op)     ? report.backwardFlops
   : isRecomputed(op) ? report.recomputeFlops
                      : report.forwardFlops) +=
      executionsPerStep(op) * countFlops(op);
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    Gemm gemm = describeGemm(matmul);
    if (std::optional<int64_t> layer = getLayer(matmul.getLoc());
        layer && getPhase(op) == "forward")
      report.layers[*layer].push_back(gemm);
  }
}

/// The FLOPs of the GEMMs a started collective runs under: those between
/// its start and its wait.
int64_t flopsUnder(StartOpInterface start) {
  int64_t flops = 0;
  for (Operation *op = start->getNextNode(); op != start.getWait();
       op = op->getNextNode())
    op->walk([&](Operation *nested) { flops += countFlops(nested); });
  return flops;
}

void countCommunication(Operation *op, Report &report) {
  // Megatron's conjugates are counted apart: the report's f and g, once
  // each (a recomputed g's all-reduce is a collective of its own below).
  if (isa<FOp>(op) && !isRecomputed(op))
    ++report.fCount;
  if (isa<GOp>(op) && !isRecomputed(op))
    ++report.gCount;
  auto collective = dyn_cast<CollectiveOpInterface>(op);
  if (!collective || getRingPasses(collective.getCollectiveKind()) == 0)
    return;
  int64_t elements = 0, bytes = 0;
  for (Value tensor : collective.getCollectiveTensors()) {
    elements += numElements(tensor.getType());
    bytes += getNumBytes(tensor.getType());
  }
  std::string axis = collective.getCollectiveAxis().str();
  int64_t times = executionsPerStep(op);
  Report::CollectiveKey key = {
      stringifyCollectiveKind(collective.getCollectiveKind()).str(),
      getPhase(op).str(), elements, axis};
  report.collectives[key] += times;
  report.commBytesByAxis[axis] += times * bytes;
  if (auto start = dyn_cast<StartOpInterface>(op)) {
    Report::Overlap &overlap = report.overlapped[key];
    overlap.started += times;
    overlap.flops += times * flopsUnder(start);
  }
}

Report analyze(ModuleOp module) {
  Report report;
  for (auto mesh : module.getOps<MeshOp>()) {
    report.tp = mesh.getAxisSize(MGT_AXIS_NAME_TP).value_or(1);
    report.dp = mesh.getAxisSize(MGT_AXIS_NAME_DP).value_or(1);
    for (StringRef axis : mesh.getAxisNames().getAsValueRange<StringAttr>()) {
      SmallVector<StringRef> names = mesh.getSubAxes(axis);
      names.push_back(axis);
      for (StringRef name : names)
        report.axisRanks[name.str()] = *mesh.getAxisSize(name);
    }
  }
  for (auto function : module.getOps<func::FuncOp>()) {
    // A kept forward entry repeats the training step's forward pass.
    if (function.isExternal() || isForwardEntry(function))
      continue;
    countParameters(function, report);
    std::map<int64_t, int64_t> recomputedByLayer;
    function.walk([&](Operation *op) {
      countActivations(op, report, recomputedByLayer);
      countCompute(op, report);
      countCommunication(op, report);
    });
    int64_t recomputedPeak = 0;
    for (const auto &[layer, bytes] : recomputedByLayer)
      recomputedPeak = std::max(recomputedPeak, bytes);
    report.activationBytes += recomputedPeak;
  }
  return report;
}

void writeJson(raw_ostream &os, const Report &report) {
  llvm::json::OStream json(os, 2);
  json.object([&] {
    json.attribute("tp", report.tp);
    json.attribute("dp", report.dp);
    json.attribute("params_total", report.paramsTotal);
    json.attribute("params_per_rank", report.paramsPerRank);
    json.attribute("params_padding", report.paramsPadding);
    json.attributeObject("bytes_per_rank", [&] {
      json.attribute("parameters", report.paramBytes);
      json.attribute("gradients", report.gradientBytes);
      json.attribute("optimizer", report.optimizerBytes);
      json.attribute("activations", report.activationBytes);
    });
    json.attributeObject("comm_bytes_per_rank_per_step", [&] {
      for (const auto &[axis, bytes] : report.commBytesByAxis)
        json.attribute(axis, bytes);
    });
    json.attributeObject("axis_ranks", [&] {
      for (const auto &[axis, ranks] : report.axisRanks)
        json.attribute(axis, ranks);
    });
    json.attributeObject("flops_per_rank_per_step", [&] {
      json.attribute("forward", report.forwardFlops);
      json.attribute("backward", report.backwardFlops);
      json.attribute("recompute", report.recomputeFlops);
    });
    json.attribute("comm_elements_per_rank_per_step", report.commElements());
    json.attributeObject("conjugates", [&] {
      json.attribute("f", report.fCount);
      json.attribute("g", report.gCount);
    });
    json.attributeArray("collectives", [&] {
      for (const auto &collective : report.collectives)
        json.object([&] {
          const auto &key = collective.first;
          json.attribute("kind", std::get<0>(key));
          json.attribute("direction", std::get<1>(key));
          json.attribute("elements", std::get<2>(key));
          json.attribute("count", collective.second);
          json.attribute("axis", std::get<3>(key));
          auto overlap = report.overlapped.find(key);
          if (overlap != report.overlapped.end()) {
            json.attribute("started", overlap->second.started);
            json.attribute("overlapped_flops", overlap->second.flops);
          }
        });
    });
    if (report.hardware)
      json.attributeObject("predicted", [&] {
        json.attribute("hardware", report.hardware->name);
        json.attribute("step_seconds", report.predicted.total());
        json.attribute("compute_seconds", report.predicted.compute);
        json.attribute("memory_seconds", report.predicted.memory);
        json.attribute("communication_seconds", report.predicted.communication);
        json.attribute("hidden_communication_seconds", report.predicted.hidden);
      });
    json.attributeArray("layers", [&] {
      for (const auto &layerGemms : report.layers)
        json.object([&] {
          json.attribute("layer", layerGemms.first);
          json.attributeArray("gemms", [&] {
            for (const Gemm &gemm : layerGemms.second)
              json.object([&] {
                json.attribute("name", gemm.name);
                json.attribute("m", gemm.batch * gemm.m);
                json.attribute("n", gemm.n);
                json.attribute("k", gemm.k);
              });
          });
        });
    });
  });
  os << "\n";
}

void writeText(raw_ostream &os, const Report &report) {
  os << "tensor parallel: tp=" << report.tp << ", data parallel: dp="
     << report.dp << "\n"
     << "parameters: " << report.paramsTotal << " total, "
     << report.paramsPerRank << " per rank";
  if (report.paramsPadding)
    os << " (of the total, " << report.paramsPadding
       << " pad the vocabulary to a multiple of tp; the model has "
       << report.paramsTotal - report.paramsPadding << ")";
  os << "\n"
     << "bytes per rank: " << report.paramBytes << " parameters, "
     << report.gradientBytes << " gradients, " << report.optimizerBytes
     << " optimizer state, " << report.activationBytes << " activations\n"
     << "FLOPs per rank per step: " << report.forwardFlops << " forward, "
     << report.backwardFlops << " backward";
  if (report.recomputeFlops)
    os << ", " << report.recomputeFlops << " recomputed";
  os << "\n"
     << "conjugates: " << report.fCount << " f, " << report.gCount << " g\n"
     << "communication per rank per step: " << report.commElements()
     << " elements\n";
  for (const auto &[key, count] : report.collectives) {
    os << "  " << std::get<0>(key) << " " << std::get<1>(key) << " over "
       << std::get<3>(key) << ": " << count << " x " << std::get<2>(key)
       << " elements";
    auto overlap = report.overlapped.find(key);
    if (overlap != report.overlapped.end())
      os << " (" << overlap->second.started << " started, under "
         << overlap->second.flops << " FLOPs)";
    os << "\n";
  }
  for (const auto &[axis, bytes] : report.commBytesByAxis) {
    os << "  bytes over " << axis << ": " << bytes;
    auto ranks = report.axisRanks.find(axis);
    if (ranks != report.axisRanks.end())
      os << " (in groups of " << ranks->second << " ranks)";
    os << "\n";
  }
  if (report.hardware)
    os << llvm::formatv("predicted step time on {0}: {1:f4} s ({2:f4} compute, "
                        "{3:f4} memory, {4:f4} communication, {5:f4} of it "
                        "hidden under compute)\n",
                        report.hardware->name, report.predicted.total(),
                        report.predicted.compute, report.predicted.memory,
                        report.predicted.communication,
                        report.predicted.hidden);
  if (!report.layers.empty()) {
    const auto &[layer, gemms] = *report.layers.begin();
    os << "layer " << layer << " local GEMMs (M x N x K):\n";
    for (const Gemm &gemm : gemms)
      os << "  " << gemm.name << ": " << gemm.batch * gemm.m << " x " << gemm.n
         << " x " << gemm.k << "\n";
  }
}

struct ExplainPass : public megatron::impl::ExplainBase<ExplainPass> {
  using ExplainBase::ExplainBase;

  void runOnOperation() override {
    if (failed(tp::verifyProgramDialects(getOperation(), getArgument())))
      return signalPassFailure();
    Report report = analyze(getOperation());
    if (!hardware.empty()) {
      std::string error;
      FailureOr<Hardware> found = lookupHardware(hardware, error);
      if (failed(found)) {
        getOperation().emitError("tp-explain: hardware ") << error;
        return signalPassFailure();
      }
      report.hardware = *found;
      report.predicted = predictStepTime(getOperation(), *found);
    }
    if (text)
      writeText(llvm::outs(), report);
    if (json.empty())
      return;
    std::error_code error;
    llvm::ToolOutputFile out(json, error, llvm::sys::fs::OF_Text);
    if (error) {
      getOperation().emitError("cannot write the report to '")
          << json << "': " << error.message();
      return signalPassFailure();
    }
    writeJson(out.os(), report);
    out.keep();
    markAllAnalysesPreserved();
  }
};

} // namespace
