//===- PerformanceModel.cpp - predicted step time of a per-rank program ---===//
#include "megatron/Transforms/PerformanceModel.h"
#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using namespace mlir::megatron;
using namespace mlir::tp;

namespace {

int64_t numElements(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  return shaped && shaped.hasStaticShape() ? shaped.getNumElements() : 0;
}

/// Scores q k^T and their product with v, counted without the causal half,
/// as Megatron's and llm.c's FLOP formulas do.
int64_t attentionFlops(RankedTensorType out) {
  auto shape = out.getShape();
  return 4 * shape[0] * shape[1] * shape[1] * shape[2];
}

/// Public specifications; the ring latency is an assumption of 2 us a step
/// inside a node and 5 us between nodes.
const Hardware kPresets[] = {
    // V100 SXM3 in a DGX-2: fp16 tensor-core peak, HBM2, NVSwitch at six
    // NVLink2 links of 25 GB/s per direction; 16 GPUs and eight 100 Gb/s
    // InfiniBand adapters a node.
    {"v100-dgx2", 125e12, 900e9, 150e9, 2e-6, 2, 16, 100e9, 5e-6},
    // H100 / H200 SXM: dense bf16 peak, HBM3 / HBM3e, NVLink4 450 GB/s per
    // direction; 8 GPUs and eight 400 Gb/s adapters a node (DGX H100/H200).
    {"h100-sxm", 989e12, 3.35e12, 450e9, 2e-6, 2, 8, 400e9, 5e-6},
    {"h200-sxm", 989e12, 4.8e12, 450e9, 2e-6, 2, 8, 400e9, 5e-6},
};

/// Where the ranks of a collective's group sit. Rank r of a mesh (the last
/// axis fastest) is in node r / gpusPerNode, so a group of an axis whose
/// inner axes hold `stride` ranks has min(n, gpusPerNode / stride) members
/// in a node.
struct Placement {
  int64_t ranks = 1, perNode = 1;
  bool spansNodes = false;
};

Placement placementOf(CollectiveOpInterface op, const Hardware &hw) {
  auto mesh =
      SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, op.getCollectiveMesh());
  if (!mesh)
    return {};
  Placement placement;
  int64_t stride = 1;
  bool inner = false;
  for (auto [name, size] :
       llvm::zip(mesh.getAxisNames().getAsValueRange<StringAttr>(),
                 mesh.getAxisSizes())) {
    if (inner)
      stride *= size;
    if (name == op.getCollectiveAxis()) {
      placement.ranks = size;
      inner = true;
    }
  }
  if (hw.gpusPerNode <= 0) {
    placement.perNode = placement.ranks;
    return placement;
  }
  placement.perNode =
      std::max<int64_t>(1, std::min(placement.ranks, hw.gpusPerNode / stride));
  placement.spansNodes = placement.ranks > placement.perNode;
  return placement;
}

/// Ring algorithms (nccl-tests' bus bandwidth definitions): each pass takes
/// N-1 steps and moves (N-1)/N of the tensors over every link.
double collectiveSeconds(CollectiveOpInterface op, const Hardware &hw) {
  Placement placement = placementOf(op, hw);
  int64_t ranks = placement.ranks;
  double passes = getRingPasses(op.getCollectiveKind());
  if (ranks <= 1)
    return 0.0;
  // A bucket pays the latency once for all its tensors.
  int64_t elements = 0;
  for (Value tensor : op.getCollectiveTensors())
    elements += numElements(tensor.getType());
  double bytes = double(elements) * hw.activationBytes;
  double bandwidth = hw.linkBytesPerSecond, latency = hw.latencySeconds;
  if (placement.spansNodes) {
    bandwidth = hw.nodeBytesPerSecond * double(placement.perNode) /
                double(hw.gpusPerNode);
    latency = hw.nodeLatencySeconds;
  }
  return passes * (ranks - 1) * latency +
         passes * (ranks - 1) / double(ranks) * bytes / bandwidth;
}

/// Bytes an op reads and writes once.
double trafficBytes(Operation *op, const Hardware &hw) {
  int64_t elements = 0;
  for (Value value : llvm::concat<Value>(op->getOperands(), op->getResults()))
    elements += numElements(value.getType());
  return double(elements) * hw.activationBytes;
}

} // namespace

int64_t megatron::countFlops(Operation *op) {
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    auto lhs = matmul.getLhs().getType();
    int64_t k = matmul.getTransposeLhs() ? lhs.getShape().end()[-2]
                                         : lhs.getShape().back();
    return 2 * numElements(matmul.getType()) * k;
  }
  if (auto weightGrad = dyn_cast<WeightGradOp>(op)) {
    int64_t rows = numElements(weightGrad.getLhs().getType()) /
                   weightGrad.getType().getDimSize(0);
    return 2 * rows * numElements(weightGrad.getType());
  }
  if (auto attention = dyn_cast<AttentionOp>(op))
    return attentionFlops(attention.getType());
  // The forward is recomputed (1x), then four products of the same size give
  // dq, dk, dv and the score gradients (2x).
  if (auto grad = dyn_cast<AttentionGradOp>(op))
    return 3 * attentionFlops(grad.getGrad().getType());
  return 0;
}

FailureOr<Hardware> megatron::lookupHardware(StringRef nameOrPath,
                                             std::string &error) {
  for (const Hardware &preset : kPresets)
    if (preset.name == nameOrPath)
      return preset;
  auto file = llvm::MemoryBuffer::getFile(nameOrPath);
  if (!file) {
    error = "'" + nameOrPath.str() + "' is neither v100-dgx2, h100-sxm, " +
            "h200-sxm nor a readable hardware JSON file";
    return failure();
  }
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*file)->getBuffer());
  if (!json) {
    error = "'" + nameOrPath.str() + "': " + llvm::toString(json.takeError());
    return failure();
  }
  const llvm::json::Object *object = json->getAsObject();
  Hardware hardware;
  auto number = [&](StringRef key, double &out) {
    std::optional<double> value = object ? object->getNumber(key) : std::nullopt;
    if (value && *value > 0)
      out = *value;
    return value && *value > 0;
  };
  double bytes = 0;
  if (!number("flops_per_second", hardware.flopsPerSecond) ||
      !number("bytes_per_second", hardware.bytesPerSecond) ||
      !number("link_bytes_per_second", hardware.linkBytesPerSecond) ||
      !number("latency_seconds", hardware.latencySeconds) ||
      !number("activation_bytes", bytes)) {
    error = "'" + nameOrPath.str() +
            "' needs positive flops_per_second, bytes_per_second, "
            "link_bytes_per_second, latency_seconds and activation_bytes";
    return failure();
  }
  hardware.activationBytes = static_cast<int64_t>(bytes);
  // A cluster of nodes: all three fields, or none (one node).
  double gpus = 0;
  bool cluster = number("gpus_per_node", gpus);
  if (cluster != number("node_bytes_per_second", hardware.nodeBytesPerSecond) ||
      cluster != number("node_latency_seconds", hardware.nodeLatencySeconds)) {
    error = "'" + nameOrPath.str() +
            "' describes nodes with positive gpus_per_node, "
            "node_bytes_per_second and node_latency_seconds, all three or none";
    return failure();
  }
  hardware.gpusPerNode = static_cast<int64_t>(gpus);
  std::optional<StringRef> name = object->getString("name");
  hardware.name = name ? name->str() : nameOrPath.str();
  return hardware;
}

int64_t megatron::executionsPerStep(Operation *op) {
  int64_t count = 1;
  for (auto loop = op->getParentOfType<LoopLikeOpInterface>(); loop;
       loop = loop->getParentOfType<LoopLikeOpInterface>())
    if (std::optional<APInt> trips = loop.getStaticTripCount())
      count *= trips->getSExtValue();
  return count;
}

namespace {

/// What one op costs per step, and in which part of the step time.
struct OpCost {
  enum Part { Compute, Memory, Communication } part = Compute;
  double seconds = 0;
  bool dataParallel = false; // a collective over the dp axis
};

std::optional<OpCost> costOf(Operation *op, const Hardware &hardware) {
  // The mesh, rank indices and f (the identity forward) cost nothing; a
  // local slice is a copy.
  auto collective = dyn_cast<CollectiveOpInterface>(op);
  if (!isa<TPDialect>(op->getDialect()) || isa<MeshOp, AxisIndexOp>(op) ||
      (collective &&
       collective.getCollectiveKind() == CollectiveKind::identity))
    return std::nullopt;
  double times = executionsPerStep(op);
  if (collective && getRingPasses(collective.getCollectiveKind()) > 0)
    return OpCost{OpCost::Communication,
                  times * collectiveSeconds(collective, hardware),
                  collective.getCollectiveAxis() == MGT_AXIS_NAME_DP};
  if (int64_t flops = countFlops(op))
    return OpCost{OpCost::Compute,
                  times * double(flops) / hardware.flopsPerSecond};
  return OpCost{OpCost::Memory,
                times * trafficBytes(op, hardware) / hardware.bytesPerSecond};
}

/// The step as two streams: compute (with the tp collectives), in program
/// order, and the dp collectives, each issued once its gradients are ready
/// and run one after another in the order they become ready (as a bucketed
/// gradient reduction issues them). An op starts when its stream is free
/// and its operands are ready; ops that cost nothing pass their operands'
/// readiness on.
class TwoStreams {
public:
  TwoStreams(ModuleOp module, const Hardware &hardware) {
    module.walk([&](Operation *op) {
      if (std::optional<OpCost> cost = costOf(op, hardware))
        costs_[op] = *cost;
    });
  }

  /// When both streams are done. The first pass gives each dp collective
  /// the time its operands are ready with no wait for other collectives
  /// (gradients never depend on reduced gradients); the collectives then
  /// run in that order, and the second pass has compute wait for them.
  double end(ModuleOp module) {
    simulate(module, /*record=*/true);
    // Program order among collectives ready at the same time.
    llvm::stable_sort(issued_, [](const auto &a, const auto &b) {
      return a.first < b.first;
    });
    double stream = 0;
    for (auto [ready, op] : issued_)
      collectiveEnd_[op] = stream =
          std::max(stream, ready) + costs_.lookup(op).seconds;
    return std::max(simulate(module, /*record=*/false), stream);
  }

private:
  /// One pass in program order; returns when the compute stream is done.
  /// `record`: note when each dp collective's operands are ready.
  double simulate(ModuleOp module, bool record) {
    ready_.clear();
    double compute = 0;
    module.walk([&](Operation *op) {
      double start = 0;
      for (Value operand : op->getOperands())
        start = std::max(start, ready_.lookup(operand));
      double end = start;
      auto cost = costs_.find(op);
      if (cost != costs_.end() && cost->second.dataParallel) {
        if (record)
          issued_.push_back({start, op});
        auto done = collectiveEnd_.find(op);
        end = done != collectiveEnd_.end() ? done->second : start;
      } else if (cost != costs_.end()) {
        end = compute = std::max(start, compute) + cost->second.seconds;
      }
      for (Value result : op->getResults())
        ready_[result] = end;
    });
    return compute;
  }

  llvm::DenseMap<Operation *, OpCost> costs_;
  llvm::DenseMap<Value, double> ready_;
  llvm::SmallVector<std::pair<double, Operation *>> issued_;
  llvm::DenseMap<Operation *, double> collectiveEnd_;
};

} // namespace

StepTime megatron::predictStepTime(ModuleOp partitioned,
                                   const Hardware &hardware,
                                   bool overlapDataParallel) {
  StepTime time;
  partitioned.walk([&](Operation *op) {
    std::optional<OpCost> cost = costOf(op, hardware);
    if (!cost)
      return;
    (cost->part == OpCost::Compute  ? time.compute
     : cost->part == OpCost::Memory ? time.memory
                                    : time.communication) += cost->seconds;
  });
  if (overlapDataParallel)
    time.hidden = std::max(
        0.0, time.total() - TwoStreams(partitioned, hardware).end(partitioned));
  return time;
}
