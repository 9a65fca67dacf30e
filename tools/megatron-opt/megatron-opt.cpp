//===- megatron-opt.cpp - mlir-opt for the tp dialect ----------------------===//
#include "megatron/Conversion/Passes.h"
#include "megatron/InitAll.h"
#include "megatron/Target/Pipelines.h"
#include "megatron/Transforms/Passes.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/InitAllPasses.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::megatron::registerAllDialects(registry);
  mlir::registerAllPasses();
  mlir::megatron::registerPassesAndPipelines();
  mlir::megatron::registerMegatronConversionPasses();
  mlir::megatron::registerLoweringPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "megatron-mlir optimizer driver\n", registry));
}
