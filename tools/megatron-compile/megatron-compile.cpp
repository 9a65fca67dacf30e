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

// The tool's own flags; the compile options (--tp, --train, --target, ...)
// are the library's (registerCompileCLOptions).
static cl::OptionCategory category("Input and output");
static cl::opt<std::string> input(cl::Positional, cl::desc("<input.mlir>"),
                                  cl::init("-"), cl::cat(category));
static cl::opt<std::string> output("o", cl::desc("output file"),
                                   cl::value_desc("file"), cl::Required,
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
  megatron::CompileOptions options;
  megatron::setCompileOptionsFromCL(options);
  if (emit == Emit::PTX && options.target != megatron::Target::CUDA)
    return toolError("--emit=ptx needs --target=cuda");
  if (emit == Emit::PTX)
    options.binaryFormat = "isa";
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
  // The planner's remarks (a layout it chose where two disagreed, as
  // sequence parallelism's does at every region) are megatron-opt's to
  // show; a compile prints its errors and warnings. Handlers run newest
  // first: this one takes the remarks before the printer sees them.
  context.getDiagEngine().registerHandler([](Diagnostic &diagnostic) {
    return success(diagnostic.getSeverity() == mlir::DiagnosticSeverity::Remark);
  });
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
  megatron::registerCompileCLOptions();
  // --help lists the tool's flags, grouped, and none of LLVM's; MLIR's
  // debugging flags (--mlir-timing, --mlir-print-ir-after-all) still work.
  SmallVector<const cl::OptionCategory *> shown =
      megatron::getCompileCLCategories();
  shown.push_back(&category);
  cl::HideUnrelatedOptions(shown);
  cl::ParseCommandLineOptions(argc, argv,
                              "megatron-mlir: GPT-2 to a tensor-parallel step\n");
  DialectRegistry registry;
  megatron::registerAllDialects(registry);
  MLIRContext context(registry);
  // A located message is what users read; the whole module behind it is not.
  context.printOpOnDiagnostic(false);
  return failed(compile(context)) ? 1 : 0;
}
