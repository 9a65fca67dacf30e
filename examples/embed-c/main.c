// embed-c IN.mlir PIPELINE [STEP.so]: runs a textual pipeline on a tp
// module through MLIR's C API and prints the result or, given STEP.so,
// writes the step library of the lowered module there.
//   embed-c gpt2.mlir 'builtin.module(megatron-pipeline{tp=2})'
//   embed-c gpt2.mlir 'builtin.module(megatron-compile-pipeline{tp=2 train=true})' step.so
#include "megatron-c/Megatron.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <stdio.h>

static void print(MlirStringRef text, void *stream) {
  fwrite(text.data, 1, text.length, (FILE *)stream);
}

static int run(MlirContext context, int argc, char **argv) {
  MlirModule module = mlirModuleCreateParseFromFile(
      context, mlirStringRefCreateFromCString(argv[1]));
  if (mlirModuleIsNull(module))
    return 1;
  MlirOperation op = mlirModuleGetOperation(module);
  MlirPassManager pm = mlirPassManagerCreate(context);
  int failed =
      mlirLogicalResultIsFailure(mlirParsePassPipeline(
          mlirPassManagerGetAsOpPassManager(pm),
          mlirStringRefCreateFromCString(argv[2]), print, stderr)) ||
      mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, op));
  if (!failed && argc == 3) {
    mlirOperationPrint(op, print, stdout);
    fputc('\n', stdout);
  }
  if (!failed && argc == 4)
    failed = mlirLogicalResultIsFailure(mlirMegatronEmitStepLibrary(
        module, mlirStringRefCreateFromCString(argv[3])));
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
  return failed;
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: embed-c IN.mlir PIPELINE [STEP.so]\n");
    return 2;
  }
  MlirContext context = mlirContextCreate();
  mlirDialectHandleLoadDialect(mlirGetDialectHandle__tp__(), context);
  mlirRegisterMegatronPasses();
  int status = run(context, argc, argv);
  mlirContextDestroy(context);
  return status;
}
