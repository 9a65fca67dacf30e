//===- PipelineFuzzer.cpp - libFuzzer target: bytes through the pipeline ---===//
//
// Each input is parsed as a tp module, verified, and, when it parses, run
// through the whole training-step compilation up to the per-rank program
// (megatron-pipeline at tp=2, tp-keep-forward, tp-autodiff, tp-optimizer,
// tp-bucket-reductions) with every diagnostic captured. Any input must end in
// success or in errors: a crash, a sanitizer report or a hang is a bug.
//
//===----------------------------------------------------------------------===//
#include "megatron/InitAll.h"
#include "megatron/Target/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace mlir;

namespace {

MLIRContext &context() {
  static MLIRContext *shared = [] {
    DialectRegistry registry;
    megatron::registerAllDialects(registry);
    auto *created = new MLIRContext(registry);
    created->loadAllAvailableDialects();
    // One thread: libFuzzer measures and bounds one input at a time.
    created->disableMultithreading();
    return created;
  }();
  return *shared;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext &ctx = context();
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  ParserConfig config(&ctx);
  // MLIR's lexer reads up to a NUL, which a file buffer ends with and the
  // fuzzer's bytes do not: a copy adds it.
  const std::string text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, config);
  if (!module)
    return 0;
  PassManager pm(&ctx);
  megatron::CompileOptions options;
  options.tp = 2;
  options.train = true;
  if (failed(megatron::buildCompilePipeline(
          pm, options, [](const Twine &) { return failure(); },
          megatron::CompileStage::Partitioned)))
    std::abort(); // the options above are valid
  (void)pm.run(*module);
  return 0;
}
