//===- Pipelines.h - global tp program to the LLVM dialect -------*- C++ -*-===//
//
// The whole compilation (buildCompilePipeline: plan, partition, the
// training step, precision, the manifest, the lowering) and the lowering of
// a partitioned step for each target; all end in the LLVM dialect that
// emitStepLibrary (StepLibrary.h) turns into a shared object.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRON_TARGET_PIPELINES_H
#define MEGATRON_TARGET_PIPELINES_H

#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Target/StepLibrary.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>
#include <string>

namespace mlir::megatron {

/// convert-tp-to-runtime through bufferization, deallocation and the
/// conversion to the LLVM dialect; loops run on the host. With
/// `outlineLayers`, each distinct layer body is lowered once, as a function
/// (tp-outline-layers).
void buildCPULoweringPipeline(OpPassManager &pm, bool outlineLayers = true);

struct CUDAPipelineOptions : public PassPipelineOptions<CUDAPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("GPU architecture: sm_80 or sm_90"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> binaryFormat{
      *this, "binary-format",
      llvm::cl::desc("what gpu.binary holds: fatbin (cubin and PTX, what "
                     "the step loads) or isa (PTX text, to read)"),
      llvm::cl::init("fatbin")};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit with ptxas and libdevice (default: the "
                     "one found at configure time)"),
      llvm::cl::init("")};
  PassOptions::Option<bool> outlineLayers{
      *this, "outline-layers",
      llvm::cl::desc("lower each distinct layer body once, as a function "
                     "(tp-outline-layers)"),
      llvm::cl::init(true)};
};

/// The CPU pipeline's bufferized step, its loops offloaded as kernels
/// compiled through NVVM to a fatbin (cubin and PTX for `chip`) embedded in
/// the module; the host code launches them through the runtime's mgpu*
/// entry points.
void buildCUDALoweringPipeline(OpPassManager &pm,
                               const CUDAPipelineOptions &options);

/// The CUDA target's program, its kernels run as host loops over their grid
/// and blocks (megatron-gpu-launch-to-host-loops), against the CPU runtime:
/// the GPU lowering checked on a machine without a GPU.
void buildCUDAOnHostLoweringPipeline(OpPassManager &pm,
                                     bool outlineLayers = true);

/// The architectures buildCUDALoweringPipeline compiles for.
bool isSupportedCUDAChip(StringRef chip);

/// Why buildCUDALoweringPipeline cannot compile with `options` (an unknown
/// chip or binary format, a toolkit directory that is not there), or
/// nothing: checked before the pipeline runs, since NVVM's own checks crash
/// on an empty chip and gpu-module-to-binary's errors do not fail the pass.
std::optional<std::string> cudaOptionsProblem(const CUDAPipelineOptions &options);

/// Everything megatron-compile does between parsing a global tp program and
/// writing its step library; megatron-compile's flags, one for one.
struct CompileOptions : public LayoutOptions<CompileOptions> {
  Option<Target> target{
      *this, "target", llvm::cl::desc("where the step runs"),
      llvm::cl::init(Target::CPU),
      llvm::cl::values(
          clEnumValN(Target::CPU, "cpu",
                     "host loops and BLAS GEMMs, MPI between ranks"),
          clEnumValN(Target::CUDA, "cuda",
                     "NVVM kernels, cuBLASLt, NCCL between ranks"),
          clEnumValN(Target::CUDAOnHost, "cuda-on-host",
                     "the cuda target's kernels run as host loops with the "
                     "CPU runtime (checks the GPU lowering without a GPU)"))};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("storage of activations and parameter copies: auto "
                     "(bf16 on the cuda target, fp32 otherwise), fp32, or "
                     "bf16 (fp32 master weights, gradients and AdamW state)"),
      llvm::cl::init("auto")};
  Option<bool> train{*this, "train",
                     llvm::cl::desc("build the training step (backward pass "
                                    "and AdamW) beside the forward entry"),
                     llvm::cl::init(false)};
  Option<bool> recompute{
      *this, "recompute",
      llvm::cl::desc("with train, keep only each layer's input for the "
                     "backward pass and recompute the layer's forward before "
                     "it (tp-recompute-layers, activation checkpointing)"),
      llvm::cl::init(false)};
  Option<int64_t> zero{
      *this, "zero",
      llvm::cl::desc("with train, ZeRO stage: 0 keeps the AdamW state whole "
                     "on every dp rank, 1 splits it over dp (the distributed "
                     "optimizer)"),
      llvm::cl::init(0)};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("with train, the most bytes of gradients one "
                     "data-parallel all-reduce bucket sums (0: one "
                     "all-reduce per gradient)"),
      llvm::cl::init(40000000)};
  Option<bool> exportGrads{
      *this, "export-grads",
      llvm::cl::desc("with train, also write every gradient into an argument"),
      llvm::cl::init(false)};
  Option<std::string> arch{
      *this, "arch", llvm::cl::desc("with target=cuda: sm_80 or sm_90"),
      llvm::cl::init("sm_90")};
  Option<std::string> binaryFormat{
      *this, "binary-format",
      llvm::cl::desc("with target=cuda: fatbin (what the step loads) or isa "
                     "(PTX text, to read)"),
      llvm::cl::init("fatbin")};
  Option<bool> generate{
      *this, "generate",
      llvm::cl::desc("compile a generation program (gpt2-mlir --generate: "
                     "prefill and decode over a KV cache), in fp32 at dp=1"),
      llvm::cl::init(false)};
  Option<bool> outlineLayers{
      *this, "outline-layers",
      llvm::cl::desc("lower and compile each distinct layer body once, as a "
                     "function called per layer (tp-outline-layers); false "
                     "keeps every layer inline"),
      llvm::cl::init(true)};
  Option<bool> overlapCollectives{
      *this, "overlap-collectives",
      llvm::cl::desc("start each all-reduce as early as its inputs allow and "
                     "wait for it as late as its first use allows "
                     "(tp-overlap-collectives); false keeps them blocking"),
      llvm::cl::init(true)};
  Option<std::string> entry{
      *this, "entry",
      llvm::cl::desc("compile a framework's function (linalg with tp.sharding "
                     "arguments, on the mesh its module declares) as the "
                     "library's one entry, instead of planning a model"),
      llvm::cl::init("")};
};

/// Where buildCompilePipeline stops: after the per-rank tp program is
/// complete, after tp-step-manifest recorded the manifest, or in the LLVM
/// dialect (what emitStepLibrary takes).
enum class CompileStage { Partitioned, Manifest, Lowered };

/// Adds the whole compilation of a global tp program to `pm`: the Megatron
/// plan and partition (megatron-pipeline); with `train`, tp-keep-forward,
/// tp-autodiff and tp-optimizer; tp-mixed-precision for bf16;
/// tp-overlap-collectives (`overlapCollectives`); tp-step-manifest; the
/// lowering for the target. Options that do not go
/// together fail through `reportError`, before anything is added.
LogicalResult
buildCompilePipeline(OpPassManager &pm, const CompileOptions &options,
                     function_ref<LogicalResult(const Twine &)> reportError,
                     CompileStage stopAfter = CompileStage::Lowered);

/// Registers `megatron-compile-pipeline`, `megatron-lower-cpu`,
/// `megatron-lower-cuda` and `megatron-lower-cuda-on-host`.
void registerTargetPipelines();

} // namespace mlir::megatron

#endif // MEGATRON_TARGET_PIPELINES_H
