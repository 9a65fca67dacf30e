//===- megatron-opt.cpp - mlir-opt for the tp dialect ----------------------===//
#include "megatron/InitAll.h"

#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::megatron::registerAllDialects(registry);
  mlir::registerAllPasses();
  mlir::megatron::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "megatron-mlir optimizer driver\n", registry));
}
