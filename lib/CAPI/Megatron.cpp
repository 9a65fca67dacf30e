//===- Megatron.cpp - megatron-mlir's C API -------------------------------===//
#include "megatron-c/Megatron.h"
#include "megatron/InitAll.h"
#include "megatron/Target/StepLibrary.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"

using namespace mlir;

namespace {

// The hooks MLIR_DEFINE_CAPI_DIALECT_REGISTRATION would write, except that
// the tp dialect brings every dialect its programs and pipelines use.
void insertTPDialect(MlirDialectRegistry registry) {
  megatron::registerAllDialects(*unwrap(registry));
}

MlirDialect loadTPDialect(MlirContext context) {
  DialectRegistry registry;
  megatron::registerAllDialects(registry);
  unwrap(context)->appendDialectRegistry(registry);
  return wrap(unwrap(context)->getOrLoadDialect<tp::TPDialect>());
}

MlirStringRef tpDialectNamespace() {
  return wrap(tp::TPDialect::getDialectNamespace());
}

} // namespace

MlirDialectHandle mlirGetDialectHandle__tp__() {
  static MlirDialectRegistrationHooks hooks = {insertTPDialect, loadTPDialect,
                                               tpDialectNamespace};
  return MlirDialectHandle{&hooks};
}

void mlirRegisterMegatronPasses() { megatron::registerAllPasses(); }

MlirStringRef mlirMegatronGetStepManifest(MlirModule module) {
  FailureOr<megatron::StepRecord> step = megatron::readStepRecord(unwrap(module));
  return succeeded(step) ? wrap(step->manifest) : MlirStringRef{nullptr, 0};
}

MlirLogicalResult mlirMegatronEmitStepLibrary(MlirModule module,
                                              MlirStringRef path) {
  return wrap(megatron::emitStepLibrary(unwrap(module), unwrap(path),
                                        megatron::StepOutput::SharedLibrary));
}
