//===- megatron-compile.cpp - GPT-2 tp IR to a tensor-parallel step .so ----===//
//
//   megatron-compile gpt2.mlir --tp=2 --target=cpu [--train] -o step.so
//   megatron-compile gpt2.mlir --tp=2 --target=cuda --arch=sm_90 -o step.so
//
// Runs the Megatron pipeline, with --train appends the backward pass and the
// AdamW update (keeping a copy of the forward pass for evaluation), records
// the manifest of the step, lowers it for the target and writes the shared
// object megatron-run loads.
//
//===----------------------------------------------------------------------===//
#include "megatron/InitAll.h"
#include "megatron/Target/Pipelines.h"
#include "megatron/Target/StepLibrary.h"
#include "megatron/Transforms/Passes.h"
#include "megatron_rt/contract.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
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
static cl::opt<megatron::Target> target(
    "target", cl::desc("where the step runs"), cl::init(megatron::Target::CPU),
    cl::values(clEnumValN(megatron::Target::CPU, "cpu",
                          "host loops and OpenBLAS, MPI between ranks"),
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
enum class Precision { Auto, FP32, BF16 };
static cl::opt<Precision> precision(
    "precision", cl::desc("storage of activations and parameter copies"),
    cl::init(Precision::Auto),
    cl::values(clEnumValN(Precision::Auto, "auto",
                          "bf16 on --target=cuda, fp32 otherwise"),
               clEnumValN(Precision::FP32, "fp32", "everything fp32"),
               clEnumValN(Precision::BF16, "bf16",
                          "bf16 activations and parameter copies, fp32 "
                          "master weights, gradients and AdamW state")),
    cl::cat(category));
static cl::opt<bool> train("train",
                           cl::desc("emit the training step (backward pass "
                                    "and AdamW) beside the forward entry"),
                           cl::cat(category));
static cl::opt<bool> exportGrads(
    "export-grads",
    cl::desc("with --train, also write every gradient into an argument"),
    cl::cat(category));
static cl::opt<bool> exportLogits(
    "export-logits",
    cl::desc("the forward entry also writes the logits into a `logits` "
             "argument (for checking against a reference)"),
    cl::cat(category));
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

static bool usesBF16() {
  if (precision == Precision::Auto)
    return target == megatron::Target::CUDA;
  return precision == Precision::BF16;
}

static LogicalResult run(PassManager &pm, ModuleOp module) {
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  return pm.run(module);
}

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

/// The module's one function with a body: the partitioned step.
static func::FuncOp stepFunction(ModuleOp module) {
  for (auto function : module.getOps<func::FuncOp>())
    if (!function.isExternal())
      return function;
  return {};
}

static func::FuncOp stepFunction(ModuleOp module,
                                 const megatron::StepEntry &entry) {
  return module.lookupSymbol<func::FuncOp>(entry.function);
}

/// Argument positions of `function` in the manifest, matched by tp.name.
static SmallVector<unsigned> manifestIndices(func::FuncOp function,
                                             func::FuncOp manifest) {
  llvm::StringMap<unsigned> position;
  for (unsigned i = 0; i < manifest.getNumArguments(); ++i)
    if (auto name = manifest.getArgAttrOfType<StringAttr>(
            i, tp::TPDialect::kNameAttrName))
      position[name.getValue()] = i;
  // An unnamed argument maps nowhere here; buildStepManifest rejects it with
  // a located error before any index is used.
  SmallVector<unsigned> indices;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    auto name =
        function.getArgAttrOfType<StringAttr>(i, tp::TPDialect::kNameAttrName);
    indices.push_back(name ? position.lookup(name.getValue()) : 0);
  }
  return indices;
}

static FailureOr<SmallVector<megatron::StepEntry>> forwardOnly(ModuleOp module) {
  func::FuncOp step = stepFunction(module);
  if (!step)
    return module.emitError("no function to compile");
  return SmallVector<megatron::StepEntry>{
      {MGT_ENTRY_KIND_FORWARD, step.getName().str(), manifestIndices(step, step)}};
}

/// Keeps the forward pass as `<name>_forward` for evaluation, then turns
/// the step into the training step.
static FailureOr<SmallVector<megatron::StepEntry>>
buildTrainStep(MLIRContext &context, ModuleOp module) {
  func::FuncOp step = stepFunction(module);
  if (!step)
    return module.emitError("no function to compile");
  OwningOpRef<ModuleOp> forwardModule = ModuleOp::create(module.getLoc());
  func::FuncOp forward = step.clone();
  forward.setName((step.getName() + "_forward").str());
  forwardModule->push_back(forward);

  PassManager training(&context);
  training.addPass(megatron::createAutodiff());
  training.addPass(megatron::createOptimizer(
      megatron::OptimizerOptions{exportGrads.getValue()}));
  if (failed(run(training, module)))
    return failure();
  forward->remove();
  module.push_back(forward);
  return SmallVector<megatron::StepEntry>{
      {MGT_ENTRY_KIND_FORWARD, forward.getName().str(),
       manifestIndices(forward, step)},
      {MGT_ENTRY_KIND_TRAIN_STEP, step.getName().str(),
       manifestIndices(step, step)}};
}

static LogicalResult compile(MLIRContext &context) {
  if (exportLogits && train) {
    WithColor::error(errs(), "megatron-compile")
        << "--export-logits is for the forward entry; drop --train\n";
    return failure();
  }
  if (emit == Emit::PTX && target != megatron::Target::CUDA) {
    WithColor::error(errs(), "megatron-compile")
        << "--emit=ptx needs --target=cuda\n";
    return failure();
  }
  if (exportGrads && !train) {
    WithColor::error(errs(), "megatron-compile")
        << "--export-grads needs --train\n";
    return failure();
  }
  if (target == megatron::Target::CUDA && !megatron::isSupportedCUDAChip(arch)) {
    WithColor::error(errs(), "megatron-compile")
        << "unsupported --arch '" << arch << "'; use sm_80 or sm_90\n";
    return failure();
  }
  std::string error;
  std::unique_ptr<MemoryBuffer> file = openInputFile(input, &error);
  if (!file) {
    WithColor::error(errs(), "megatron-compile") << error << "\n";
    return failure();
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return failure();

  PassManager partition(&context);
  megatron::PipelineOptions options;
  options.tp = tpSize;
  options.exportLogits = exportLogits;
  megatron::buildMegatronPipeline(partition, options);
  if (failed(run(partition, *module)))
    return failure();
  FailureOr<SmallVector<megatron::StepEntry>> entries =
      train ? buildTrainStep(context, *module) : forwardOnly(*module);
  if (failed(entries))
    return failure();
  if (usesBF16()) {
    PassManager mixed(&context);
    mixed.addPass(megatron::createMixedPrecision());
    if (failed(run(mixed, *module)))
      return failure();
  }
  if (emit == Emit::PartitionedMLIR)
    return writeModule(*module);
  FailureOr<std::string> manifest = megatron::buildStepManifest(
      *module, stepFunction(*module, entries->back()), *entries, target);
  if (failed(manifest))
    return failure();
  if (emit == Emit::Manifest)
    return writeOutput([&](raw_ostream &os) { os << *manifest << "\n"; });

  PassManager lower(&context);
  if (target == megatron::Target::CUDAOnHost) {
    megatron::buildCUDAOnHostLoweringPipeline(lower);
  } else if (target == megatron::Target::CUDA) {
    megatron::CUDAPipelineOptions cuda;
    cuda.chip = arch;
    if (emit == Emit::PTX)
      cuda.binaryFormat = "isa";
    megatron::buildCUDALoweringPipeline(lower, cuda);
  } else {
    megatron::buildCPULoweringPipeline(lower);
  }
  if (failed(run(lower, *module)))
    return failure();
  if (emit == Emit::LoweredMLIR)
    return writeModule(*module);
  if (emit == Emit::PTX)
    return writeKernelAssembly(*module);
  return megatron::emitStepLibrary(*module, *manifest, *entries, target,
                                   output,
                                   emit == Emit::Object
                                       ? megatron::StepOutput::Object
                                       : megatron::StepOutput::SharedLibrary);
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  registerPassManagerCLOptions();
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
