//===- CompilePipeline.cpp - a global tp program to its step library ------===//
//
// The one description of megatron-compile's work, shared by the tool,
// megatron-opt (`megatron-compile-pipeline`) and embedders (C++ and the C
// API), so that every host runs the same stages.
//
//===----------------------------------------------------------------------===//
#include "megatron/Analysis/Passes.h"
#include "megatron/Dialect/TP/Transforms/Passes.h"
#include "megatron/Lowering/Passes.h"
#include "megatron/Target/Passes.h"
#include "megatron/Target/Pipelines.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::megatron;

namespace {

/// What the backward pass recomputes (the recompute option).
enum class RecomputeMode { None, Selective, Full };

/// The recompute option's mode, or nothing for an unknown one.
std::optional<RecomputeMode> recomputeMode(const CompileOptions &options) {
  const std::string &mode = options.recompute.getValue();
  if (mode == "none")
    return RecomputeMode::None;
  if (mode == "selective")
    return RecomputeMode::Selective;
  // The flag without a value: Megatron-LM's full recomputation.
  if (mode == "full" || mode.empty())
    return RecomputeMode::Full;
  return std::nullopt;
}

/// Why a framework's function cannot be compiled with `options`, or
/// nothing: its module states its mesh and it has no training step.
std::optional<std::string> functionConflict(const CompileOptions &options) {
  if (options.tp != 1 || options.dp != 1 || options.microBatches != 1)
    return "entry compiles a function on the mesh its module declares; drop "
           "tp, dp and micro-batches";
  if (options.train || options.exportLogits || options.exportGrads)
    return "entry compiles a function as it is; drop train, export-logits "
           "and export-grads";
  return std::nullopt;
}

/// Why a generation program cannot be compiled with `options`, or nothing:
/// it is not trained, runs on tp ranks only and keeps fp32.
std::optional<std::string> generationConflict(const CompileOptions &options) {
  if (options.train || options.exportLogits || options.exportGrads ||
      !options.entry.empty())
    return "generate compiles the prefill and decode entries; drop train, "
           "export-logits, export-grads and entry";
  if (options.dp != 1 || options.microBatches != 1)
    return "generate runs on the tp ranks of one replica; drop dp and "
           "micro-batches";
  if (options.precision == "bf16")
    return "generate compiles in fp32 (the KV cache and the sampled "
           "logits); drop precision=bf16";
  return std::nullopt;
}

/// The CUDA lowering's options of a compile for target=cuda.
void setCUDAOptions(const CompileOptions &options, CUDAPipelineOptions &cuda) {
  cuda.chip = options.arch;
  cuda.binaryFormat = options.binaryFormat;
  cuda.outlineLayers = options.outlineLayers;
}

/// Why `options` cannot be compiled, or nothing.
std::optional<std::string> conflict(const CompileOptions &options) {
  if (!options.entry.empty())
    if (std::optional<std::string> why = functionConflict(options))
      return why;
  if (options.generate)
    if (std::optional<std::string> why = generationConflict(options))
      return why;
  if (options.exportLogits && options.train)
    return "export-logits is for the forward entry; drop train";
  if (options.exportGrads && !options.train)
    return "export-grads needs train";
  if (options.bucketBytes < 0)
    return "bucket-bytes must not be negative, got " +
           std::to_string(options.bucketBytes);
  if (options.zero != 0 && options.zero != 1)
    return "unknown zero stage " + std::to_string(options.zero) +
           "; use 0 or 1";
  if (!recomputeMode(options))
    return "unknown recompute '" + options.recompute.getValue() +
           "'; use none, selective or full";
  if (*recomputeMode(options) != RecomputeMode::None && !options.train)
    return "recompute needs train: it recomputes what the backward pass reads";
  if (options.zero == 1 && !options.train)
    return "zero=1 needs train: it splits the optimizer's state";
  if (options.zero == 1 && options.exportGrads)
    return "export-grads needs zero=0: with zero=1 each dp rank keeps only "
           "its rows of a gradient";
  if (options.exportLogits && (options.dp > 1 || options.microBatches > 1))
    return "export-logits needs dp=1 and micro-batches=1: megatron-run "
           "gathers the logits of one batch over tp only";
  // A chip named for another target would be ignored without a word.
  if (options.arch.hasValue() && options.target != Target::CUDA)
    return "arch is for target=cuda: the " +
           stringifyTarget(options.target).str() + " target compiles no GPU "
           "code";
  if (options.target == Target::CUDA) {
    CUDAPipelineOptions cuda;
    setCUDAOptions(options, cuda);
    if (std::optional<std::string> why = cudaOptionsProblem(cuda))
      return why;
  }
  if (options.precision != "auto" && options.precision != "fp32" &&
      options.precision != "bf16")
    return "unknown precision '" + options.precision.getValue() +
           "'; use auto, fp32 or bf16";
  return std::nullopt;
}

bool usesBF16(const CompileOptions &options) {
  if (options.precision == "auto")
    return options.target == Target::CUDA && !options.generate;
  return options.precision == "bf16";
}

void addPartitionStages(OpPassManager &pm, const CompileOptions &options) {
  if (!options.entry.empty()) {
    pm.addPass(createImportShard());
    pm.addPass(createExpandReshapes());
    pm.addPass(createFunctionEntry(FunctionEntryOptions{options.entry}));
    buildPartitionPipeline(pm, /*exportLogits=*/false);
  } else {
    buildMegatronPipeline(pm, options.annotateOptions(), options.exportLogits);
  }
  if (options.train) {
    pm.addPass(createKeepForward());
    pm.addPass(createAutodiff());
    if (RecomputeMode mode = *recomputeMode(options);
        mode != RecomputeMode::None)
      pm.addPass(createRecomputeLayers(
          RecomputeLayersOptions{mode == RecomputeMode::Selective}));
  }
  // After the backward pass, which is differentiated as if the micro-batches
  // were ranks; before the optimizer, which runs once per step.
  if (options.microBatches > 1)
    pm.addPass(createMicroBatches());
  if (options.train) {
    pm.addPass(
        createOptimizer(OptimizerOptions{options.exportGrads, options.zero}));
    if (options.bucketBytes > 0)
      pm.addPass(createBucketReductions(
          BucketReductionsOptions{options.bucketBytes}));
  }
  if (usesBF16(options)) {
    pm.addPass(createMixedPrecision());
    if (options.train && options.zero == 1)
      pm.addPass(createShardMasterWeights());
  }
  // Last: it keeps the types mixed precision chose.
  if (options.overlapCollectives)
    pm.addPass(createOverlapCollectives());
}

void addLoweringStages(OpPassManager &pm, const CompileOptions &options) {
  switch (options.target) {
  case Target::CPU:
    return buildCPULoweringPipeline(pm, options.outlineLayers);
  case Target::CUDAOnHost:
    return buildCUDAOnHostLoweringPipeline(pm, options.outlineLayers);
  case Target::CUDA: {
    CUDAPipelineOptions cuda;
    setCUDAOptions(options, cuda);
    return buildCUDALoweringPipeline(pm, cuda);
  }
  }
}

} // namespace

LogicalResult megatron::buildCompilePipeline(
    OpPassManager &pm, const CompileOptions &options,
    function_ref<LogicalResult(const Twine &)> reportError,
    CompileStage stopAfter) {
  if (std::optional<std::string> why = conflict(options))
    return reportError(*why);
  addPartitionStages(pm, options);
  if (stopAfter == CompileStage::Partitioned)
    return success();
  pm.addPass(createStepManifest(StepManifestOptions{
      stringifyTarget(options.target).str(), options.generate}));
  if (stopAfter == CompileStage::Manifest)
    return success();
  addLoweringStages(pm, options);
  return success();
}

void megatron::registerTargetPipelines() {
  registerPassPipeline(
      "megatron-compile-pipeline",
      "A global tp program to the LLVM dialect of its step library: "
      "megatron-pipeline, the training step, precision, tp-step-manifest "
      "and the lowering for the target",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> reportError) {
        CompileOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        return buildCompilePipeline(pm, options, reportError);
      },
      [](function_ref<void(const detail::PassOptions &)> describe) {
        describe(CompileOptions());
      });
  PassPipelineRegistration<>(
      "megatron-lower-cpu",
      "Lower a partitioned tp program to the LLVM dialect for the CPU target",
      [](OpPassManager &pm) { buildCPULoweringPipeline(pm); });
  registerPassPipeline(
      "megatron-lower-cuda",
      "Lower a partitioned tp program to CUDA kernels and LLVM host code",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> reportError) {
        CUDAPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (std::optional<std::string> why = cudaOptionsProblem(options))
          return reportError(*why);
        buildCUDALoweringPipeline(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> describe) {
        describe(CUDAPipelineOptions());
      });
  PassPipelineRegistration<>(
      "megatron-lower-cuda-on-host",
      "The CUDA target's kernels as host loops against the CPU runtime",
      [](OpPassManager &pm) { buildCUDAOnHostLoweringPipeline(pm); });
}
