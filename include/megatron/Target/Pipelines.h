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
/// writing its step library: the options of megatron-compile-pipeline and
/// megatron-compile's flags, declared once in the .def files.
struct CompileOptions : public LayoutOptions<CompileOptions> {
#define MEGATRON_OPTION(GROUP, TYPE, MEMBER, FLAG, ...)                       \
  Option<TYPE> MEMBER{*this, FLAG, __VA_ARGS__};
#include "megatron/Target/CompileOptions.def"
#undef MEGATRON_OPTION
  /// Set by megatron-compile's --emit=ptx, not a flag of its own: a step
  /// library holding PTX text would not load.
  Option<std::string> binaryFormat{
      *this, "binary-format",
      llvm::cl::desc("with target=cuda: fatbin (what the step loads) or isa "
                     "(PTX text, to read)"),
      llvm::cl::init("fatbin")};
};

/// Registers CompileOptions (LayoutOptions.def and CompileOptions.def) as
/// command-line flags of the tool that calls it, each in its --help group,
/// as CIRCT's firtool registers its options for every host; call before
/// llvm::cl::ParseCommandLineOptions.
void registerCompileCLOptions();

/// The --help groups of the flags registerCompileCLOptions registers, for
/// llvm::cl::HideUnrelatedOptions beside the tool's own.
SmallVector<const llvm::cl::OptionCategory *> getCompileCLCategories();

/// Sets the compile options the command line gave as registered flags;
/// the others keep the pipeline's defaults.
void setCompileOptionsFromCL(CompileOptions &options);

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
