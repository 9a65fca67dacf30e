//===- Explain.cpp - parameters, FLOPs and communication per rank ---------===//
#include "LayerLocations.h"
#include "megatron/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <map>

namespace mlir::megatron {
#define GEN_PASS_DEF_EXPLAIN
#include "megatron/Transforms/Passes.h.inc"
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
  int64_t tp = 1;
  int64_t paramsTotal = 0, paramsPerRank = 0;
  int64_t forwardFlops = 0, backwardFlops = 0;
  int64_t fCount = 0, gCount = 0;
  /// (kind, direction, elements) -> count
  std::map<std::tuple<std::string, std::string, int64_t>, int64_t> collectives;
  std::map<int64_t, std::vector<Gemm>> layers;

  int64_t commElements() const {
    int64_t total = 0;
    for (const auto &[key, count] : collectives)
      total += std::get<2>(key) * count;
    return total;
  }
};

void countParameters(func::FuncOp function, Report &report) {
  for (BlockArgument arg : function.getArguments()) {
    if (!function.getArgAttr(arg.getArgNumber(), TPDialect::kNameAttrName) ||
        !isa<FloatType>(getElementTypeOrSelf(arg.getType())))
      continue;
    int64_t local = numElements(arg.getType());
    int64_t global = local;
    if (auto shape = function.getArgAttrOfType<DenseI64ArrayAttr>(
            arg.getArgNumber(), TPDialect::kGlobalShapeAttrName)) {
      global = 1;
      for (int64_t size : shape.asArrayRef())
        global *= size;
    }
    report.paramsTotal += global;
    report.paramsPerRank += local;
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

bool isBackward(Operation *op) {
  return op->hasAttr(TPDialect::kBackwardAttrName);
}

/// Scores q k^T and their product with v, counted without the causal half,
/// as Megatron's and llm.c's FLOP formulas do.
int64_t attentionFlops(RankedTensorType out) {
  auto shape = out.getShape();
  return 4 * shape[0] * shape[1] * shape[1] * shape[2];
}

void countCompute(Operation *op, Report &report) {
  int64_t &flops = isBackward(op) ? report.backwardFlops : report.forwardFlops;
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    Gemm gemm = describeGemm(matmul);
    flops += 2 * gemm.batch * gemm.m * gemm.n * gemm.k;
    if (std::optional<int64_t> layer = getLayer(gemm.name);
        layer && !isBackward(op))
      report.layers[*layer].push_back(gemm);
  } else if (auto weightGrad = dyn_cast<WeightGradOp>(op)) {
    int64_t rows = numElements(weightGrad.getLhs().getType()) /
                   weightGrad.getType().getDimSize(0);
    flops += 2 * rows * numElements(weightGrad.getType());
  } else if (auto attention = dyn_cast<AttentionOp>(op)) {
    flops += attentionFlops(attention.getType());
  } else if (auto grad = dyn_cast<AttentionGradOp>(op)) {
    // The forward is recomputed (1x), then four products of the same size
    // give dq, dk, dv and the score gradients (2x).
    flops += 3 * attentionFlops(grad.getGrad().getType());
  }
}

void countCommunication(Operation *op, Report &report) {
  std::string direction = isBackward(op) ? "backward" : "forward";
  auto add = [&](StringRef kind, Value value) {
    ++report.collectives[{kind.str(), direction, numElements(value.getType())}];
  };
  if (auto g = dyn_cast<GOp>(op)) {
    ++report.gCount;
    add("all_reduce", g.getInput());
  } else if (isa<FOp>(op)) {
    ++report.fCount;
  } else if (auto allReduce = dyn_cast<AllReduceOp>(op)) {
    add("all_reduce", allReduce.getInput());
  } else if (auto gather = dyn_cast<AllGatherOp>(op)) {
    add("all_gather", gather.getResult());
  } else if (auto scatter = dyn_cast<ReduceScatterOp>(op)) {
    add("reduce_scatter", scatter.getInput());
  }
}

Report analyze(ModuleOp module) {
  Report report;
  for (auto mesh : module.getOps<MeshOp>())
    report.tp = mesh.getAxisSize("tp").value_or(1);
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal())
      continue;
    countParameters(function, report);
    function.walk([&](Operation *op) {
      countCompute(op, report);
      countCommunication(op, report);
    });
  }
  return report;
}

void writeJson(raw_ostream &os, const Report &report) {
  llvm::json::OStream json(os, 2);
  json.object([&] {
    json.attribute("tp", report.tp);
    json.attribute("params_total", report.paramsTotal);
    json.attribute("params_per_rank", report.paramsPerRank);
    json.attributeObject("flops_per_rank_per_step", [&] {
      json.attribute("forward", report.forwardFlops);
      json.attribute("backward", report.backwardFlops);
    });
    json.attribute("comm_elements_per_rank_per_step", report.commElements());
    json.attributeObject("conjugates", [&] {
      json.attribute("f", report.fCount);
      json.attribute("g", report.gCount);
    });
    json.attributeArray("collectives", [&] {
      for (const auto &[key, count] : report.collectives)
        json.object([&] {
          json.attribute("kind", std::get<0>(key));
          json.attribute("direction", std::get<1>(key));
          json.attribute("elements", std::get<2>(key));
          json.attribute("count", count);
        });
    });
    json.attributeArray("layers", [&] {
      for (const auto &[layer, gemms] : report.layers)
        json.object([&] {
          json.attribute("layer", layer);
          json.attributeArray("gemms", [&] {
            for (const Gemm &gemm : gemms)
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
  os << "tensor parallel: tp=" << report.tp << "\n"
     << "parameters: " << report.paramsTotal << " total, "
     << report.paramsPerRank << " per rank\n"
     << "FLOPs per rank per step: " << report.forwardFlops << " forward, "
     << report.backwardFlops << " backward\n"
     << "conjugates: " << report.fCount << " f, " << report.gCount << " g\n"
     << "communication per rank per step: " << report.commElements()
     << " elements\n";
  for (const auto &[key, count] : report.collectives)
    os << "  " << std::get<0>(key) << " " << std::get<1>(key) << ": " << count
       << " x " << std::get<2>(key) << " elements\n";
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
    Report report = analyze(getOperation());
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
