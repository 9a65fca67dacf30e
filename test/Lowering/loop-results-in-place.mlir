// RUN: megatron-opt %s -megatron-loop-results-in-place | FileCheck %s

// A loop that yields the buffer it carries unchanged returns its initial
// buffer: the step then returns its own argument. A buffer the loop
// replaces stays the loop's result.
// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[W:.*]]: memref<4x8xf32>, %[[X:.*]]: memref<8xf32>)
// CHECK:         %[[R:.*]]:2 = scf.for
// CHECK:         return %[[W]], %[[R]]#1
func.func private @update(memref<4x8xf32>, index)
func.func private @fresh() -> memref<8xf32>
func.func @step(%w: memref<4x8xf32>, %x: memref<8xf32>) -> (memref<4x8xf32>, memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r:2 = scf.for %i = %c0 to %c4 step %c1 iter_args(%s = %w, %y = %x) -> (memref<4x8xf32>, memref<8xf32>) {
    func.call @update(%s, %i) : (memref<4x8xf32>, index) -> ()
    %n = func.call @fresh() : () -> memref<8xf32>
    scf.yield %s, %n : memref<4x8xf32>, memref<8xf32>
  }
  return %r#0, %r#1 : memref<4x8xf32>, memref<8xf32>
}
