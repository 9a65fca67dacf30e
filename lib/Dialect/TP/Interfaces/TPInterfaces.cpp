//===- TPInterfaces.cpp - tp op interfaces --------------------------------===//
#include "megatron/Dialect/TP/Interfaces/TPInterfaces.h"

using namespace mlir;
using namespace mlir::tp;

#include "megatron/Dialect/TP/Interfaces/TPInterfacesEnums.cpp.inc"

#include "megatron/Dialect/TP/Interfaces/TPInterfaces.cpp.inc"

int64_t tp::getRingPasses(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::all_reduce:
    return 2;
  case CollectiveKind::all_gather:
  case CollectiveKind::reduce_scatter:
    return 1;
  case CollectiveKind::identity:
  case CollectiveKind::local_slice:
    return 0;
  }
  llvm_unreachable("unknown collective kind");
}
