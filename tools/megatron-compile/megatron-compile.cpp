//===- megatron-compile.cpp - GPT-2 tp IR to a tensor-parallel step .so ----===//
//
//   megatron-compile gpt2.mlir --tp=2 --target=cpu -o step.so
//
// Runs the Megatron pipeline, records the manifest of the partitioned step,
// lowers it for the target and writes the shared object megatron-run loads.
//
//===----------------------------------------------------------------------===//
#include "megatron/InitAll.h"
#include "megatron/Target/StepLibrary.h"
#include "megatron/Transforms/Passes.h"

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
static cl::opt<std::string> target("target", cl::desc("cpu"),
                                   cl::init("cpu"), cl::cat(category));
enum class Emit { SharedLibrary, Object, PartitionedMLIR, Manifest, LoweredMLIR };
static cl::opt<Emit> emit(
    "emit", cl::desc("what to write"), cl::init(Emit::SharedLibrary),
    cl::values(clEnumValN(Emit::SharedLibrary, "so", "the step shared object"),
               clEnumValN(Emit::Object, "obj", "the step object file"),
               clEnumValN(Emit::PartitionedMLIR, "partitioned",
                          "the per-rank tp program"),
               clEnumValN(Emit::Manifest, "manifest",
                          "the step's argument manifest (JSON)"),
               clEnumValN(Emit::LoweredMLIR, "lowered",
                          "the LLVM-dialect module")),
    cl::cat(category));

static LogicalResult run(MLIRContext &context, PassManager &pm,
                         ModuleOp module) {
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

static LogicalResult compile(MLIRContext &context) {
  if (target != "cpu") {
    WithColor::error(errs(), "megatron-compile")
        << "unknown --target '" << target << "'; this build targets cpu\n";
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
  megatron::buildMegatronPipeline(partition, options);
  if (failed(run(context, partition, *module)))
    return failure();
  if (emit == Emit::PartitionedMLIR)
    return writeModule(*module);
  FailureOr<std::string> manifest = megatron::buildStepManifest(*module);
  if (failed(manifest))
    return failure();
  if (emit == Emit::Manifest)
    return writeOutput([&](raw_ostream &os) { os << *manifest << "\n"; });

  PassManager lower(&context);
  megatron::buildCPULoweringPipeline(lower);
  if (failed(run(context, lower, *module)))
    return failure();
  if (emit == Emit::LoweredMLIR)
    return writeModule(*module);
  return megatron::emitStepLibrary(*module, *manifest, output,
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
  return failed(compile(context)) ? 1 : 0;
}
