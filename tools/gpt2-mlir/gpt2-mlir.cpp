//===- gpt2-mlir.cpp - print GPT-2 as tp IR at global shapes ---------------===//
#include "megatron/Models/GPT2.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;
using namespace mlir::megatron;

// --help's groups: the model, the batch it is written for, what to write.
static cl::OptionCategory modelCategory("Model");
static cl::OptionCategory batchCategory("Batch");
static cl::OptionCategory outputCategory("Output");
static cl::opt<std::string>
    preset("preset", cl::init("124M"),
           cl::desc("tiny, 124M, 350M, 774M, 1558M, or Megatron-LM's Table "
                    "1: megatron-1.2B, megatron-2.5B, megatron-4.2B, "
                    "megatron-8.3B"),
           cl::cat(modelCategory));
static cl::opt<int64_t> layers("layers", cl::desc("transformer blocks"),
                               cl::cat(modelCategory));
static cl::opt<int64_t> heads("heads", cl::desc("attention heads"),
                              cl::cat(modelCategory));
static cl::opt<int64_t> embd("embd", cl::desc("embedding width"),
                             cl::cat(modelCategory));
static cl::opt<int64_t> vocab("vocab", cl::desc("vocabulary size"),
                              cl::cat(modelCategory));
static cl::opt<int64_t> ctx("ctx", cl::desc("rows of the position table"),
                            cl::cat(modelCategory));
static cl::opt<int64_t> seq("seq", cl::desc("sequence length of a batch"),
                            cl::cat(batchCategory));
static cl::opt<int64_t> batch("batch", cl::desc("sequences per batch"),
                              cl::cat(batchCategory));
static cl::opt<bool> generate(
    "generate",
    cl::desc("the generation program (prefill of --seq prompt tokens, decode "
             "of one, a KV cache of --ctx positions) instead of the loss"),
    cl::cat(outputCategory));
static cl::opt<bool>
    printParams("print-params",
                cl::desc("list the parameters and their count instead of IR"),
                cl::cat(outputCategory));
static cl::opt<std::string> output("o", cl::init("-"),
                                   cl::desc("output file"),
                                   cl::value_desc("file"), cl::cat(outputCategory));

/// The preset, with every size given on the command line replacing its own.
static std::optional<GPT2Config> configFromFlags() {
  std::optional<GPT2Config> config = GPT2Config::fromPreset(preset);
  if (!config)
    return std::nullopt;
  for (auto [flag, field] :
       {std::pair{&layers, &config->layers}, {&heads, &config->heads},
        {&embd, &config->embd}, {&vocab, &config->vocab},
        {&ctx, &config->ctx}, {&::seq, &config->seq}, {&batch, &config->batch}})
    if (flag->getNumOccurrences())
      *field = *flag;
  return config;
}

static void printParameterTable(raw_ostream &os, const GPT2Config &config) {
  for (const ParameterSpec &spec : getParameterSpecs(config)) {
    os << spec.name << " [";
    interleaveComma(spec.shape, os);
    os << "] " << spec.numElements() << "\n";
  }
  os << "total parameters: " << countParameters(config) << "\n";
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(
      {&modelCategory, &batchCategory, &outputCategory});
  cl::ParseCommandLineOptions(argc, argv,
                              "GPT-2 forward pass and loss as tp IR\n");
  std::optional<GPT2Config> config = configFromFlags();
  if (!config) {
    WithColor::error(errs(), "gpt2-mlir")
        << "unknown preset '" << preset
        << "'; expected tiny, 124M, 350M, 774M, 1558M, megatron-1.2B, "
           "megatron-2.5B, megatron-4.2B or megatron-8.3B\n";
    return 1;
  }
  if (std::string problem = config->validate(); !problem.empty()) {
    WithColor::error(errs(), "gpt2-mlir") << problem << "\n";
    return 1;
  }

  std::error_code error;
  ToolOutputFile out(output, error, sys::fs::OF_Text);
  if (error) {
    WithColor::error(errs(), "gpt2-mlir")
        << "cannot write '" << output << "': " << error.message() << "\n";
    return 1;
  }
  if (printParams) {
    printParameterTable(out.os(), *config);
  } else {
    mlir::MLIRContext context;
    mlir::OwningOpRef<mlir::ModuleOp> module =
        generate ? buildGPT2GenerationModule(context, *config)
                 : buildGPT2Module(context, *config);
    if (failed(mlir::verify(*module)))
      return 1;
    // Ops carry the Hugging Face module they implement as their location
    // ("h.3.mlp.c_fc"): reports and diagnostics name layers by it.
    module->print(out.os(), mlir::OpPrintingFlags().enableDebugInfo());
    out.os() << "\n";
  }
  out.keep();
  return 0;
}
