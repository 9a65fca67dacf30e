//===- megatron-compile.cpp - a global tp program to a step .so -----------===//
//
//   megatron-compile gpt2.mlir --tp=2 --target=cpu [--train] -o step.so
//   megatron-compile gpt2.mlir --tp=2 --target=cuda --arch=sm_90 -o step.so
//
// Runs megatron-compile-pipeline (buildCompilePipeline: the Megatron plan and
// partition, with --train the backward pass and AdamW beside a kept forward
// entry, precision, the manifest, the lowering for the target) up to the
// stage --emit asks for, and writes it: by default the shared object
// megatron-run loads.
//
//===----------------------------------------------------------------------===//
#include "megatron/InitAll.h"
#include "megatron/Target/Pipelines.h"
#include "megatron/Target/StepLibrary.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;
using namespace mlir;

static cl::OptionCategory category("megatron-compile options");
static cl::opt<std::string> input(cl::Positional, cl::desc("<input.mlir>"),
                                  cl::init("-"), cl::cat(category));
static cl::opt<std::string> output("o", cl::desc("output file"),
                                   cl::value_desc("file"), cl::Required,
                                   cl::cat(category));
static cl::opt<int64_t> tpSize("tp", cl::desc("tensor-parallel size"),
                           cl::init(1), cl::cat(category));
static cl::opt<int64_t> dpSize(
    "dp", cl::desc("data-parallel size: each of dp x tp ranks (tp neighbours) "
                   "takes batch/dp rows"),
    cl::init(1), cl::cat(category));
static cl::opt<int64_t> microBatches(
    "micro-batches",
    cl::desc("micro-batches per step: each dp rank runs its batch/dp rows in "
             "this many parts and sums their gradients, reduced over dp once"),
    cl::init(1), cl::cat(category));
static cl::opt<megatron::Target> target(
    "target", cl::desc("where the step runs"), cl::init(megatron::Target::CPU),
    cl::values(clEnumValN(megatron::Target::CPU, "cpu",
                          "host loops and BLAS GEMMs, MPI between ranks"),
               clEnumValN(megatron::Target::CUDA, "cuda",
                          "NVVM kernels, cuBLASLt, NCCL between ranks"),
               clEnumValN(megatron::Target::CUDAOnHost, "cuda-on-host",
                          "the cuda target's kernels run as host loops with "
                          "the CPU runtime (checks the GPU lowering without "
                          "a GPU)")),
    cl::cat(category));
static cl::opt<std::string> arch("arch",
                                 cl::desc("with --target=cuda: sm_80 or sm_90"),
                                 cl::init("sm_90"), cl::cat(category));
static cl::opt<std::string> precision(
    "precision",
    cl::desc("storage of activations and parameter copies: auto (bf16 on "
             "--target=cuda, fp32 otherwise), fp32, or bf16 (fp32 master "
             "weights, gradients and AdamW state)"),
    cl::init("auto"), cl::cat(category));
static cl::opt<bool> train("train",
                           cl::desc("emit the training step (backward pass "
                                    "and AdamW) beside the forward entry"),
                           cl::cat(category));
static cl::opt<bool> recompute(
    "recompute",
    cl::desc("with --train, keep only each layer's input for the backward "
             "pass and recompute the rest of the layer before it "
             "(activation checkpointing)"),
    cl::init(false), cl::cat(category));
static cl::opt<int64_t> zeroStage(
    "zero",
    cl::desc("with --train, ZeRO stage: 1 splits the AdamW state over dp (each "
             "dp rank updates its rows, then all-gathers them), 0 keeps it "
             "whole"),
    cl::init(0), cl::cat(category));
static cl::opt<int64_t> bucketBytes(
    "bucket-bytes",
    cl::desc("with --train, the most bytes of gradients one data-parallel "
             "all-reduce bucket sums (0: one all-reduce per gradient)"),
    cl::init(40000000), cl::cat(category));
static cl::opt<bool> exportGrads(
    "export-grads",
    cl::desc("with --train, also write every gradient into an argument"),
    cl::cat(category));
static cl::opt<bool> exportLogits(
    "export-logits",
    cl::desc("the forward entry also writes the logits into a `logits` "
             "argument (for checking against a reference)"),
    cl::cat(category));
static cl::opt<bool> outlineLayers(
    "outline-layers",
    cl::desc("lower and compile each distinct layer body once, as a "
             "function called per layer (false: every layer inline)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> overlapCollectives(
    "overlap-collectives",
    cl::desc("run each all-reduce under the compute that does not need it "
             "(false: every collective blocks)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> generate(
    "generate",
    cl::desc("compile a generation program (gpt2-mlir --generate: prefill "
             "and decode over a head-sharded KV cache), in fp32"),
    cl::cat(category));
static cl::opt<std::string> entry(
    "entry",
    cl::desc("compile the function of this name, as a framework lowered it "
             "(linalg with tp.sharding arguments, on the mesh its module "
             "declares), as the library's one entry"),
    cl::value_desc("function"), cl::init(""), cl::cat(category));
enum class Emit {
  SharedLibrary,
  Object,
  PartitionedMLIR,
  Manifest,
  LoweredMLIR,
  PTX
};
static cl::opt<Emit> emit(
    "emit", cl::desc("what to write"), cl::init(Emit::SharedLibrary),
    cl::values(clEnumValN(Emit::SharedLibrary, "so", "the step shared object"),
               clEnumValN(Emit::Object, "obj", "the step object file"),
               clEnumValN(Emit::PartitionedMLIR, "partitioned",
                          "the per-rank tp program"),
               clEnumValN(Emit::Manifest, "manifest",
                          "the step's argument manifest (JSON)"),
               clEnumValN(Emit::LoweredMLIR, "lowered",
                          "the LLVM-dialect module"),
               clEnumValN(Emit::PTX, "ptx",
                          "with --target=cuda, the PTX of the step's kernels")),
    cl::cat(category));

static LogicalResult writeOutput(llvm::function_ref<void(raw_ostream &)> write) {
  std::string error;
  std::unique_ptr<ToolOutputFile> out = openOutputFile(output, &error);
  if (!out) {
    WithColor::error(errs(), "megatron-compile") << error << "\n";
    return failure();
  }
  write(out->os());
  out->keep();
  return success();
}

static LogicalResult writeModule(ModuleOp module) {
  return writeOutput([&](raw_ostream &os) { module.print(os); });
}

/// The assembly each gpu.binary holds when lowered with binary-format=isa.
static LogicalResult writeKernelAssembly(ModuleOp module) {
  return writeOutput([&](raw_ostream &os) {
    module.walk([&](gpu::BinaryOp binary) {
      for (mlir::Attribute object : binary.getObjects())
        os << "// gpu.binary @" << binary.getName() << "\n"
           << cast<gpu::ObjectAttr>(object).getObject().getValue() << "\n";
    });
  });
}

static LogicalResult toolError(const Twine &message) {
  WithColor::error(errs(), "megatron-compile") << message << "\n";
  return failure();
}

/// The flags as the pipeline's options, named as the pipeline names them.
static void setCompileOptions(megatron::CompileOptions &options) {
  options.tp = tpSize;
  options.dp = dpSize;
  options.microBatches = microBatches;
  options.target = target;
  options.precision = precision;
  options.train = train;
  options.exportGrads = exportGrads;
  options.recompute = recompute;
  options.zero = zeroStage;
  options.bucketBytes = bucketBytes;
  options.exportLogits = exportLogits;
  options.arch = arch;
  options.entry = entry;
  options.generate = generate;
  options.outlineLayers = outlineLayers;
  options.overlapCollectives = overlapCollectives;
  if (emit == Emit::PTX)
    options.binaryFormat = "isa";
}

static megatron::CompileStage lastStage() {
  switch (emit) {
  case Emit::PartitionedMLIR:
    return megatron::CompileStage::Partitioned;
  case Emit::Manifest:
    return megatron::CompileStage::Manifest;
  default:
    return megatron::CompileStage::Lowered;
  }
}

static LogicalResult writeStage(ModuleOp module) {
  switch (emit) {
  case Emit::PartitionedMLIR:
  case Emit::LoweredMLIR:
    return writeModule(module);
  case Emit::Manifest: {
    FailureOr<megatron::StepRecord> step = megatron::readStepRecord(module);
    if (failed(step))
      return failure();
    return writeOutput([&](raw_ostream &os) { os << step->manifest << "\n"; });
  }
  case Emit::PTX:
    return writeKernelAssembly(module);
  case Emit::Object:
  case Emit::SharedLibrary:
    return megatron::emitStepLibrary(module, output,
                                     emit == Emit::Object
                                         ? megatron::StepOutput::Object
                                         : megatron::StepOutput::SharedLibrary);
  }
  llvm_unreachable("unknown output");
}

static LogicalResult compile(MLIRContext &context) {
  if (emit == Emit::PTX && target != megatron::Target::CUDA)
    return toolError("--emit=ptx needs --target=cuda");
  // A chip named for another target would be ignored without a word.
  if (arch.getNumOccurrences() && target != megatron::Target::CUDA)
    return toolError("--arch is for --target=cuda: the " +
                     megatron::stringifyTarget(target) +
                     " target compiles no GPU code");
  megatron::CompileOptions options;
  setCompileOptions(options);
  PassManager pm(&context);
  if (failed(megatron::buildCompilePipeline(pm, options, toolError,
                                            lastStage())) ||
      failed(applyPassManagerCLOptions(pm)))
    return failure();
  // --mlir-timing: where a compile's seconds go, pass by pass.
  DefaultTimingManager timing;
  applyDefaultTimingManagerCLOptions(timing);
  TimingScope timingRoot = timing.getRootScope();
  pm.enableTiming(timingRoot);
  std::string error;
  std::unique_ptr<MemoryBuffer> file = openInputFile(input, &error);
  if (!file)
    return toolError(error);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module || failed(pm.run(*module)))
    return failure();
  return writeStage(*module);
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  registerMLIRContextCLOptions();
  registerAsmPrinterCLOptions();
  cl::ParseCommandLineOptions(argc, argv,
                              "megatron-mlir: GPT-2 to a tensor-parallel step\n");
  DialectRegistry registry;
  megatron::registerAllDialects(registry);
  MLIRContext context(registry);
  // A located message is what users read; the whole module behind it is not.
  context.printOpOnDiagnostic(false);
  return failed(compile(context)) ? 1 : 0;
}
