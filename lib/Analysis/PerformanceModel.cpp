//===- PerformanceModel.cpp - predicted step time of a per-rank program ---===//
#include "megatron/Analysis/PerformanceModel.h"
#include "megatron/Dialect/TP/IR/TP.h"
#include "megatron/Dialect/TP/Utils/Utils.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

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

int64_t megatron::countModelFlops(Operation *op) {
  return isRecomputed(op) ? 0 : countFlops(op);
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
  // Counts: whole, and small enough that byte counts stay in range.
  auto count = [&](StringRef key, double value, int64_t &out) {
    if (value == std::floor(value) && value <= 1024) {
      out = static_cast<int64_t>(value);
      return true;
    }
    error = "'" + nameOrPath.str() + "': " + key.str() +
            " must be a whole number from 1 to 1024, got " +
            std::to_string(value);
    return false;
  };
  if (!count("activation_bytes", bytes, hardware.activationBytes))
    return failure();
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
  if (cluster && !count("gpus_per_node", gpus, hardware.gpusPerNode))
    return failure();
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
};

std::optional<OpCost> costOf(Operation *op, const Hardware &hardware) {
  // The mesh, rank indices, f (the identity forward) and a wait (its
  // collective's time is the start's) cost nothing; a local slice is a copy.
  auto collective = dyn_cast<CollectiveOpInterface>(op);
  if (!isa<TPDialect>(op->getDialect()) ||
      isa<MeshOp, AxisIndexOp, WaitOp>(op) ||
      (collective &&
       collective.getCollectiveKind() == CollectiveKind::identity))
    return std::nullopt;
  double times = executionsPerStep(op);
  if (collective && getRingPasses(collective.getCollectiveKind()) > 0)
    return OpCost{OpCost::Communication,
                  times * collectiveSeconds(collective, hardware)};
  if (int64_t flops = countFlops(op))
    return OpCost{OpCost::Compute,
                  times * double(flops) / hardware.flopsPerSecond};
  return OpCost{OpCost::Memory,
                times * trafficBytes(op, hardware) / hardware.bytesPerSecond};
}

/// The step as the runtime runs it: the rank's thread computes in program
/// order, and its collectives, started or blocking, run one after another
/// on one queue in the order the thread issues them (every rank issues them
/// in one order, as MPI and NCCL require). A started collective joins the
/// queue and the thread goes on; its tp.wait, like a blocking collective,
/// holds the thread until the queue has run it. Returns when the thread
/// and the queue are both done.
double simulateStartsAndWaits(ModuleOp module, const Hardware &hardware) {
  double thread = 0, queue = 0;
  llvm::DenseMap<Value, double> done; // a started collective's end
  module.walk([&](Operation *op) {
    if (auto wait = dyn_cast<WaitOp>(op)) {
      thread = std::max(thread, done.lookup(wait.getPending()));
      return;
    }
    std::optional<OpCost> cost = costOf(op, hardware);
    if (!cost)
      return;
    if (cost->part != OpCost::Communication) {
      thread += cost->seconds;
    } else if (auto start = dyn_cast<StartOpInterface>(op)) {
      queue = std::max(thread, queue) + cost->seconds;
      done[start.getPending()] = queue;
    } else {
      thread = queue = std::max(thread, queue) + cost->seconds;
    }
  });
  return std::max(thread, queue);
}

} // namespace

StepTime megatron::predictStepTime(ModuleOp partitioned,
                                   const Hardware &hardware) {
  StepTime time;
  bool started = false;
  partitioned.walk([&](Operation *op) {
    started |= isa<StartOpInterface>(op);
    std::optional<OpCost> cost = costOf(op, hardware);
    if (!cost)
      return;
    (cost->part == OpCost::Compute  ? time.compute
     : cost->part == OpCost::Memory ? time.memory
                                    : time.communication) += cost->seconds;
  });
  // Without started collectives the step is the sum of its parts.
  if (started)
    time.hidden = std::max(
        0.0, time.total() - simulateStartsAndWaits(partitioned, hardware));
  return time;
}
