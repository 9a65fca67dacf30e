// RUN: megatron-opt %s -megatron-copies-to-linalg | FileCheck %s

// A copy of a strided view becomes a linalg.copy (a loop or a kernel), not a
// call of MLIR's memrefCopy, which the runtimes do not provide.

// CHECK-LABEL: func.func @strided(
// CHECK-SAME: %[[SRC:.+]]: memref<4x8xf32, strided<[16, 1]>>, %[[DST:.+]]: memref<4x8xf32>
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%[[SRC]] : memref<4x8xf32, strided<[16, 1]>>) outs(%[[DST]] : memref<4x8xf32>)
func.func @strided(%src: memref<4x8xf32, strided<[16, 1]>>, %dst: memref<4x8xf32>) {
  memref.copy %src, %dst : memref<4x8xf32, strided<[16, 1]>> to memref<4x8xf32>
  return
}
