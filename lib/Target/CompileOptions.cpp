//===- CompileOptions.cpp - the compile options as command-line flags -----===//
//
// megatron-compile's flags are CompileOptions' fields, registered here from
// the same .def files the pipeline options are declared in: a flag and its
// pipeline option cannot differ in name, default or description.
//
//===----------------------------------------------------------------------===//
#include "megatron/Target/Pipelines.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ManagedStatic.h"

using namespace mlir;
using namespace mlir::megatron;

namespace {
/// One llvm::cl::opt per compile option, in the --help group its .def
/// entry names.
struct CompileCLOptions {
  llvm::cl::OptionCategory programGroup{"Program"};
  llvm::cl::OptionCategory layoutGroup{"Layout over ranks"};
  llvm::cl::OptionCategory trainingGroup{"Training step"};
  llvm::cl::OptionCategory targetGroup{"Target"};

#define MEGATRON_OPTION(GROUP, TYPE, MEMBER, FLAG, ...)                       \
  llvm::cl::opt<TYPE> MEMBER{FLAG, llvm::cl::cat(GROUP##Group), __VA_ARGS__};
#include "megatron/Dialect/TP/Transforms/LayoutOptions.def"
#include "megatron/Target/CompileOptions.def"
#undef MEGATRON_OPTION
};
} // namespace

static llvm::ManagedStatic<CompileCLOptions> clOptions;

void megatron::registerCompileCLOptions() { (void)*clOptions; }

SmallVector<const llvm::cl::OptionCategory *>
megatron::getCompileCLCategories() {
  return {&clOptions->programGroup, &clOptions->layoutGroup,
          &clOptions->trainingGroup, &clOptions->targetGroup};
}

void megatron::setCompileOptionsFromCL(CompileOptions &options) {
  // Only what the command line gave: an option assigned counts as given
  // (hasValue), which the pipeline's checks of combinations read.
#define MEGATRON_OPTION(GROUP, TYPE, MEMBER, FLAG, ...)                       \
  if (clOptions->MEMBER.getNumOccurrences())                                  \
    options.MEMBER = clOptions->MEMBER.getValue();
#include "megatron/Dialect/TP/Transforms/LayoutOptions.def"
#include "megatron/Target/CompileOptions.def"
#undef MEGATRON_OPTION
}
