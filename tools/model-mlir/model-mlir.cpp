//===- model-mlir.cpp - print a model as tp IR at global shapes -----------===//
//
// One binary, one name per family: gpt2-mlir and llama-mlir (a link to it)
// write their family's training step or generation program. The family is
// the name the binary was run under; each has its presets and the sizes of
// its config, and the flags of another family are refused.
//
//===----------------------------------------------------------------------===//
#include "megatron/Models/GPT2.h"
#include "megatron/Models/Llama.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <functional>

using namespace llvm;
using namespace mlir::megatron;

// --help's groups: the model (and its family's own sizes), the batch it is
// written for, what to write.
static cl::OptionCategory modelCategory("Model");
static cl::OptionCategory llamaCategory("Llama");
static cl::OptionCategory batchCategory("Batch");
static cl::OptionCategory outputCategory("Output");
static cl::opt<std::string> preset("preset",
                                   cl::desc("a named configuration: --help "
                                            "lists the family's"),
                                   cl::cat(modelCategory));
static cl::opt<int64_t> layers("layers", cl::desc("transformer blocks"),
                               cl::cat(modelCategory));
static cl::opt<int64_t> heads("heads", cl::desc("attention (query) heads"),
                              cl::cat(modelCategory));
static cl::opt<int64_t> embd("embd", cl::desc("embedding width"),
                             cl::cat(modelCategory));
static cl::opt<int64_t> vocab("vocab", cl::desc("vocabulary size"),
                              cl::cat(modelCategory));
static cl::opt<int64_t>
    ctx("ctx",
        cl::desc("context: GPT-2's position table rows, the positions "
                 "Llama's generation caches hold"),
        cl::cat(modelCategory));
static cl::opt<int64_t> kvHeads("kv-heads",
                                cl::desc("key/value heads (grouped-query "
                                         "attention when fewer than --heads)"),
                                cl::cat(llamaCategory));
static cl::opt<int64_t> ffn("ffn", cl::desc("the MLP's intermediate width"),
                            cl::cat(llamaCategory));
static cl::opt<double> ropeTheta("rope-theta",
                                 cl::desc("the rotary embedding's base"),
                                 cl::cat(llamaCategory));
static cl::opt<double> normEps("norm-eps",
                               cl::desc("the RMS norms' epsilon"),
                               cl::cat(llamaCategory));
static cl::opt<int64_t> seq("seq", cl::desc("sequence length of a batch"),
                            cl::cat(batchCategory));
static cl::opt<int64_t> batch("batch", cl::desc("sequences per batch"),
                              cl::cat(batchCategory));
static cl::opt<double>
    dropout("dropout",
            cl::desc("the training step's dropout probability, in [0, 1): "
                     "attention's probabilities and each block's outputs "
                     "(0: none)"),
            cl::cat(modelCategory));
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

namespace {

/// A family as the tool sees it: what its config takes from the command
/// line, and the generator's entry points.
template <typename Config> struct Family {
  const char *tool;
  const char *defaultPreset;
  std::function<std::optional<Config>(StringRef)> fromPreset;
  StringRef presets;
  /// The config's fields the shared and the family's own flags set.
  std::function<void(Config &)> applyFlags;
  std::vector<cl::OptionCategory *> categories;
  llvm::SmallVector<ParameterSpec> (*parameters)(const Config &);
  mlir::OwningOpRef<mlir::ModuleOp> (*training)(mlir::MLIRContext &,
                                                const Config &);
  mlir::OwningOpRef<mlir::ModuleOp> (*generation)(mlir::MLIRContext &,
                                                  const Config &);
};

template <typename Field>
void setIfGiven(const cl::opt<Field> &flag, Field &field) {
  if (flag.getNumOccurrences())
    field = flag;
}

void applySharedFlags(int64_t &l, int64_t &h, int64_t &e, int64_t &v,
                      int64_t &c, int64_t &s, int64_t &b) {
  for (auto [flag, field] : {std::pair{&layers, &l}, {&heads, &h},
                             {&embd, &e}, {&vocab, &v}, {&ctx, &c},
                             {&::seq, &s}, {&batch, &b}})
    setIfGiven(*flag, *field);
}

Family<GPT2Config> gpt2Family() {
  return {"gpt2-mlir",
          "124M",
          GPT2Config::fromPreset,
          "tiny, 124M, 350M, 774M, 1558M, megatron-1.2B, megatron-2.5B, "
          "megatron-4.2B or megatron-8.3B",
          [](GPT2Config &c) {
            applySharedFlags(c.layers, c.heads, c.embd, c.vocab, c.ctx, c.seq,
                             c.batch);
          },
          {&modelCategory, &batchCategory, &outputCategory},
          getParameterSpecs,
          buildGPT2Module,
          buildGPT2GenerationModule};
}

Family<LlamaConfig> llamaFamily() {
  return {"llama-mlir",
          "llama3-8B",
          LlamaConfig::fromPreset,
          LlamaConfig::presetNames(),
          [](LlamaConfig &c) {
            applySharedFlags(c.layers, c.heads, c.embd, c.vocab, c.ctx, c.seq,
                             c.batch);
            setIfGiven(kvHeads, c.kvHeads);
            setIfGiven(ffn, c.ffn);
            setIfGiven(ropeTheta, c.ropeTheta);
            setIfGiven(normEps, c.normEps);
          },
          {&modelCategory, &llamaCategory, &batchCategory, &outputCategory},
          getParameterSpecs,
          buildLlamaModule,
          buildLlamaGenerationModule};
}

void printParameterTable(raw_ostream &os, ArrayRef<ParameterSpec> specs) {
  for (const ParameterSpec &spec : specs) {
    os << spec.name << " [";
    interleaveComma(spec.shape, os);
    os << "] " << spec.numElements() << "\n";
  }
  os << "total parameters: " << countParameters(specs) << "\n";
}

/// A flag of another family's own sizes given to this one, or "".
std::string foreignFlag(ArrayRef<cl::OptionCategory *> mine) {
  const cl::OptionCategory *familySizes[] = {&llamaCategory};
  for (auto &[name, option] : cl::getRegisteredOptions())
    if (option->getNumOccurrences())
      for (cl::OptionCategory *category : option->Categories)
        if (llvm::is_contained(familySizes, category) &&
            !llvm::is_contained(mine, category))
          return ("--" + name + " (" + category->getName() + ")").str();
  return "";
}

template <typename Config>
int run(const Family<Config> &family, int argc, char **argv) {
  cl::HideUnrelatedOptions(family.categories);
  cl::ParseCommandLineOptions(
      argc, argv,
      (Twine(family.tool) + ": the model's training step (forward pass and "
                            "loss) or generation program as tp IR at global "
                            "shapes\n\npresets: " +
       family.presets + "\n")
          .str());
  auto fail = [&](const Twine &message) {
    WithColor::error(errs(), family.tool) << message << "\n";
    return 1;
  };
  if (std::string flag = foreignFlag(family.categories); !flag.empty())
    return fail(flag + " is not an option of " + family.tool);
  StringRef name = preset.getNumOccurrences() ? StringRef(preset)
                                              : family.defaultPreset;
  std::optional<Config> config = family.fromPreset(name);
  if (!config)
    return fail("unknown preset '" + name + "'; expected " + family.presets);
  family.applyFlags(*config);
  setIfGiven(dropout, config->dropout);
  if (std::string problem = config->validate(); !problem.empty())
    return fail(problem);
  if (generate && config->dropout != 0.0)
    return fail("--dropout applies to the training step, not to --generate");

  std::error_code error;
  ToolOutputFile out(output, error, sys::fs::OF_Text);
  if (error)
    return fail("cannot write '" + output + "': " + error.message());
  if (printParams) {
    printParameterTable(out.os(), family.parameters(*config));
  } else {
    mlir::MLIRContext context;
    mlir::OwningOpRef<mlir::ModuleOp> module =
        generate ? family.generation(context, *config)
                 : family.training(context, *config);
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

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  StringRef tool = sys::path::filename(argv[0]);
  if (tool == "llama-mlir")
    return run(llamaFamily(), argc, argv);
  if (tool == "gpt2-mlir")
    return run(gpt2Family(), argc, argv);
  WithColor::error(errs(), tool)
      << "run me as gpt2-mlir or llama-mlir: the name picks the model family\n";
  return 1;
}
