//===- megatron-opt.cpp - mlir-opt for the tp dialect ----------------------===//
#include "megatron/InitAll.h"
#include "megatron/Transforms/Passes.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::megatron::registerAllDialects(registry);
  mlir::registerTransformsPasses();
  mlir::megatron::registerPassesAndPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "megatron-mlir optimizer driver\n", registry));
}
