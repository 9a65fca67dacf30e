// embed-cpp IN.mlir TP [STEP.so]: partitions a global tp program for TP
// ranks and prints the per-rank program or, given STEP.so, compiles its
// training step for the CPU into STEP.so.
#include "megatron/InitAll.h"

#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    llvm::errs() << "usage: embed-cpp IN.mlir TP [STEP.so]\n";
    return 2;
  }
  DialectRegistry registry;
  megatron::registerAllDialects(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(argv[1], &context);
  if (!module)
    return 1;

  bool library = argc == 4;
  megatron::CompileOptions options;
  options.tp = std::atoi(argv[2]);
  options.train = library;
  PassManager pm(&context);
  auto reportError = [&](const Twine &message) {
    return emitError(module->getLoc(), message);
  };
  if (failed(megatron::buildCompilePipeline(
          pm, options, reportError,
          library ? megatron::CompileStage::Lowered
                  : megatron::CompileStage::Partitioned)) ||
      failed(pm.run(*module)))
    return 1;
  if (!library) {
    module->print(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  return failed(megatron::emitStepLibrary(*module, argv[3],
                                          megatron::StepOutput::SharedLibrary));
}
