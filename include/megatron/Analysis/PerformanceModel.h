//===- PerformanceModel.h - predicted step time of a per-rank program -*- C++ -*-===//
//
// A roofline for compute and an alpha-beta model for collectives: GEMMs and
// attention cost their FLOPs at the device's peak rate, every other op the
// bytes it reads and writes at its memory bandwidth, and collectives the
// ring algorithm's steps as nccl-tests defines them (an all-reduce of S bytes
// over N ranks: 2(N-1) latencies and 2(N-1)/N * S bytes over the link). A
// group of ranks inside one node rings over the node's links; a group that
// spans nodes rings over the network, with the share of its node's adapters
// that its members in the node have (every group of the axis reduces at
// once). Ops run one after another, except the collectives a program
// starts (tp-overlap-collectives' tp.all_reduce_start): the model follows
// the schedule in the IR as the runtime runs it, each started collective on
// the rank's in-order collective queue from where it starts, under the
// compute up to its tp.wait.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_TRANSFORMS_PERFORMANCEMODEL_H
#define MEGATRON_TRANSFORMS_PERFORMANCEMODEL_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::megatron {

struct Hardware {
  std::string name;
  double flopsPerSecond;
  double bytesPerSecond;
  /// Per-rank bandwidth of the links a ring collective uses inside a node,
  /// one direction.
  double linkBytesPerSecond;
  /// Latency of one step of a ring collective inside a node.
  double latencySeconds;
  /// Bytes per activation element (2 for bf16/fp16 training, 4 for fp32).
  int64_t activationBytes;
  /// Ranks per node (rank r in node r / gpusPerNode); 0: one node holds
  /// every rank.
  int64_t gpusPerNode = 0;
  /// A node's bandwidth to the other nodes (all its network adapters, one
  /// direction), which its ranks share, and the latency of a ring step
  /// between nodes.
  double nodeBytesPerSecond = 0, nodeLatencySeconds = 0;
};

/// A preset from public specifications (v100-dgx2, h100-sxm, h200-sxm) or a
/// JSON file with the same fields, as the CPU microbenchmark writes.
FailureOr<Hardware> lookupHardware(StringRef nameOrPath, std::string &error);

struct StepTime {
  double compute = 0, memory = 0, communication = 0;
  /// The communication that ran under compute (started collectives).
  double hidden = 0;
  double total() const { return compute + memory + communication - hidden; }
};

StepTime predictStepTime(ModuleOp partitioned, const Hardware &hardware);

/// How many times `op` runs per step: the product of the static trip counts
/// of the loops around it (the micro-batch loop), 1 outside loops.
int64_t executionsPerStep(Operation *op);

/// FLOPs of a GEMM-like op (matmul, weight_grad, attention and its
/// gradient); 0 for the others. The explain report counts with it too.
int64_t countFlops(Operation *op);

/// The FLOPs of the work a step asks for: countFlops, but 0 for an op
/// tp-recompute-layers ran again (Megatron's model FLOPs, what MFU and the
/// runtime's achieved rate divide by).
int64_t countModelFlops(Operation *op);

} // namespace mlir::megatron

#endif // MEGATRON_TRANSFORMS_PERFORMANCEMODEL_H
