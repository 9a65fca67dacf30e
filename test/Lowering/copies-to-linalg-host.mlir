// RUN: megatron-opt %s -megatron-copies-to-linalg=host-memory=true | FileCheck %s

// In host memory a copy between contiguous buffers (a layer's result into
// its slot of a stack) stays memref.copy, one memcpy; a strided one becomes
// a loop.
// CHECK-LABEL: func.func @host(
// CHECK:         memref.copy %{{.*}}, %{{.*}} : memref<8xf32> to memref<8xf32, strided<[1], offset: ?>>
// CHECK:         linalg.copy ins(%{{.*}} : memref<4x8xf32, strided<[16, 1]>>)
func.func @host(%src: memref<8xf32>, %stack: memref<4x8xf32>, %i: index, %wide: memref<4x16xf32>, %dst: memref<4x8xf32>) {
  %slot = memref.subview %stack[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
  memref.copy %src, %slot : memref<8xf32> to memref<8xf32, strided<[1], offset: ?>>
  %half = memref.subview %wide[0, 0] [4, 8] [1, 1] : memref<4x16xf32> to memref<4x8xf32, strided<[16, 1]>>
  memref.copy %half, %dst : memref<4x8xf32, strided<[16, 1]>> to memref<4x8xf32>
  return
}
