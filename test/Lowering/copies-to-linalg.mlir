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

// A copy of a view onto the same view (an update written back where it was
// read) copies nothing.
// CHECK-LABEL: func.func @same_view(
// CHECK-NOT:     copy
// CHECK:         return
func.func @same_view(%stack: memref<4x8xf32>, %i: index) {
  %a = memref.subview %stack[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
  %b = memref.subview %stack[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
  memref.copy %a, %b : memref<8xf32, strided<[1], offset: ?>> to memref<8xf32, strided<[1], offset: ?>>
  return
}
