// RUN: megatron-opt %s -split-input-file -megatron-parallel-host-loops | FileCheck %s
// RUN: megatron-opt %s -split-input-file -megatron-parallel-host-loops -convert-scf-to-cf -finalize-memref-to-llvm -convert-arith-to-llvm -convert-func-to-llvm -convert-cf-to-llvm -reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM

// An update over a 64x256 parameter: the loop becomes a function over a
// range of its rows, its buffers and scalar passed through one struct the
// caller fills, and a call of mrt_parallel_for over its 64 rows.
// CHECK-LABEL: func.func private @update_parallel_loop(
// CHECK-SAME:    %[[CAPTURES:.*]]: !llvm.ptr, %[[BEGIN:.*]]: i64, %[[END:.*]]: i64)
// CHECK:         %[[PADDR:.*]] = llvm.getelementptr %[[CAPTURES]][0, 0]
// CHECK:         %[[PDESC:.*]] = llvm.load %[[PADDR]] : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK:         %[[P:.*]] = builtin.unrealized_conversion_cast %[[PDESC]] {{.*}} to memref<64x256xf32>
// CHECK:         %[[GADDR:.*]] = llvm.getelementptr %[[CAPTURES]][0, 1]
// CHECK:         %[[G:.*]] = builtin.unrealized_conversion_cast {{.*}} to memref<64x256xf32, strided<[256, 1], offset: ?>>
// CHECK:         %[[LRADDR:.*]] = llvm.getelementptr %[[CAPTURES]][0, 2]
// CHECK:         %[[LR:.*]] = llvm.load %[[LRADDR]] : !llvm.ptr -> f32
// CHECK:         %[[FIRST:.*]] = arith.index_cast %[[BEGIN]] : i64 to index
// CHECK:         %[[LAST:.*]] = arith.index_cast %[[END]] : i64 to index
// CHECK:         scf.parallel (%[[I:.*]], %[[J:.*]]) = ({{.*}}, %[[C0:.*]]) to ({{.*}}, %[[C256:.*]])
// CHECK:           memref.load %[[G]][%[[I]], %[[J]]]
// CHECK:           arith.mulf {{.*}}, %[[LR]]
// CHECK:           memref.store {{.*}}, %[[P]][%[[I]], %[[J]]]
// CHECK-LABEL: func.func @update(
// CHECK-SAME:    %[[ARG_P:.*]]: memref<64x256xf32>, %[[ARG_G:.*]]: memref<64x256xf32, strided<[256, 1], offset: ?>>, %[[ARG_LR:.*]]: f32)
// CHECK:         %[[STRUCT:.*]] = llvm.alloca
// CHECK:         %[[F0:.*]] = llvm.getelementptr %[[STRUCT]][0, 0]
// CHECK:         %[[D0:.*]] = builtin.unrealized_conversion_cast %[[ARG_P]]
// CHECK:         llvm.store %[[D0]], %[[F0]]
// CHECK:         %[[D1:.*]] = builtin.unrealized_conversion_cast %[[ARG_G]]
// CHECK:         llvm.store %[[D1]]
// CHECK:         llvm.store %[[ARG_LR]]
// CHECK:         %[[FN:.*]] = constant @update_parallel_loop
// CHECK:         %[[ROWS:.*]] = arith.constant 64 : i64
// CHECK:         call @mrt_parallel_for(%[[FN]], %[[STRUCT]], %[[ROWS]])
// CHECK-NOT:     scf.parallel
// CHECK:         return
// CHECK:       func.func private @mrt_parallel_for((!llvm.ptr, i64, i64) -> (), !llvm.ptr, i64)

// The casts fold into the descriptors finalize-memref-to-llvm makes; the
// function's address goes to the runtime.
// LLVM-LABEL: llvm.func @update_parallel_loop(
// LLVM-LABEL: llvm.func @update(
// LLVM:         %[[ADDR:.*]] = llvm.mlir.addressof @update_parallel_loop : !llvm.ptr
// LLVM:         llvm.call @mrt_parallel_for(%[[ADDR]],
// LLVM-NOT:     unrealized_conversion_cast
func.func @update(%p: memref<64x256xf32>, %g: memref<64x256xf32, strided<[256, 1], offset: ?>>, %lr: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c256) step (%c1, %c1) {
    %x = memref.load %p[%i, %j] : memref<64x256xf32>
    %d = memref.load %g[%i, %j] : memref<64x256xf32, strided<[256, 1], offset: ?>>
    %s = arith.mulf %d, %lr : f32
    %y = arith.subf %x, %s : f32
    memref.store %y, %p[%i, %j] : memref<64x256xf32>
    scf.reduce
  }
  return
}

// -----

// A loop inside a loop over layers: the struct is allocated once, at the
// top of the function, and filled before each call.
// CHECK-LABEL: func.func @per_layer(
// CHECK-NEXT:    llvm.mlir.constant(1 : i64)
// CHECK-NEXT:    %[[STRUCT:.*]] = llvm.alloca
// CHECK:         scf.for
// CHECK:           llvm.store
// CHECK:           call @mrt_parallel_for({{.*}}, %[[STRUCT]],
func.func @per_layer(%p: memref<4x64x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  %f = arith.constant 2.0 : f32
  scf.for %l = %c0 to %c4 step %c1 {
    scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c256) step (%c1, %c1) {
      %x = memref.load %p[%l, %i, %j] : memref<4x64x256xf32>
      %y = arith.mulf %x, %f : f32
      %z = arith.addf %y, %x : f32
      memref.store %z, %p[%l, %i, %j] : memref<4x64x256xf32>
      scf.reduce
    }
  }
  return
}

// -----

// Too little work for the threads to pay off (8x256 iterations of 4 ops),
// and a loop whose trip count is not a constant: both stay.
// CHECK-LABEL: func.func @stay(
// CHECK-NOT:     mrt_parallel_for
// CHECK:         scf.parallel
// CHECK:         scf.parallel
// CHECK-NOT:     mrt_parallel_for
func.func @stay(%p: memref<8x256xf32>, %q: memref<?x256xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c256 = arith.constant 256 : index
  %f = arith.constant 2.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c256) step (%c1, %c1) {
    %x = memref.load %p[%i, %j] : memref<8x256xf32>
    %y = arith.mulf %x, %f : f32
    memref.store %y, %p[%i, %j] : memref<8x256xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c256) step (%c1, %c1) {
    %x = memref.load %q[%i, %j] : memref<?x256xf32>
    %y = arith.mulf %x, %f : f32
    memref.store %y, %q[%i, %j] : memref<?x256xf32>
    scf.reduce
  }
  return
}
