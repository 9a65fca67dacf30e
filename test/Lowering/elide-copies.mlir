// RUN: megatron-opt %s -split-input-file -megatron-elide-copies | FileCheck %s

// A buffer a runtime call computes and a copy then puts into a stack's slot
// is the slot: the slot's view moves above the call, the flattened view the
// call takes is rebuilt with the slot's offset, and the copy and the free go.
// CHECK-LABEL: func.func @into_slot(
// CHECK-SAME:    %[[STACK:.*]]: memref<3x4x8xf32>, %[[I:.*]]: index)
// CHECK-NEXT:    %[[SLOT:.*]] = memref.subview %[[STACK]][%[[I]], 0, 0] [1, 4, 8] [1, 1, 1]
// CHECK-NEXT:    %[[FLAT:.*]] = memref.collapse_shape %[[SLOT]] {{\[\[}}0, 1]] : memref<4x8xf32, strided<[8, 1], offset: ?>> into memref<32xf32, strided<[1], offset: ?>>
// CHECK-NEXT:    %[[ANY:.*]] = memref.cast %[[FLAT]] : memref<32xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
// CHECK-NEXT:    call @compute(%[[ANY]])
// CHECK-NEXT:    return
func.func private @compute(memref<?xf32, strided<[1], offset: ?>>)
func.func @into_slot(%stack: memref<3x4x8xf32>, %i: index) {
  %a = memref.alloc() : memref<4x8xf32>
  %flat = memref.collapse_shape %a [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  %any = memref.cast %flat : memref<32xf32> to memref<?xf32, strided<[1], offset: ?>>
  call @compute(%any) : (memref<?xf32, strided<[1], offset: ?>>) -> ()
  %slot = memref.subview %stack[%i, 0, 0] [1, 4, 8] [1, 1, 1] : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.copy %a, %slot : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.dealloc %a : memref<4x8xf32>
  return
}

// -----

// The stack is read between the allocation and the copy (another slot,
// perhaps the same one): the copy stays.
// CHECK-LABEL: func.func @stack_read_between(
// CHECK:         %[[A:.*]] = memref.alloc()
// CHECK:         memref.copy %[[A]],
// CHECK:         memref.dealloc %[[A]]
func.func private @read(memref<4x8xf32, strided<[8, 1], offset: ?>>, memref<4x8xf32>)
func.func @stack_read_between(%stack: memref<3x4x8xf32>, %i: index, %j: index) {
  %a = memref.alloc() : memref<4x8xf32>
  %other = memref.subview %stack[%j, 0, 0] [1, 4, 8] [1, 1, 1] : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  call @read(%other, %a) : (memref<4x8xf32, strided<[8, 1], offset: ?>>, memref<4x8xf32>) -> ()
  %slot = memref.subview %stack[%i, 0, 0] [1, 4, 8] [1, 1, 1] : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.copy %a, %slot : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.dealloc %a : memref<4x8xf32>
  return
}

// -----

// A collective started on the stack before the allocation is waited for
// between it and the copy: writing the slot earlier would race with it.
// CHECK-LABEL: func.func @collective_in_flight(
// CHECK:         memref.copy
func.func private @start(memref<3x4x8xf32>) -> i64
func.func private @wait(i64)
func.func @collective_in_flight(%stack: memref<3x4x8xf32>, %i: index, %c: f32) {
  %ticket = call @start(%stack) : (memref<3x4x8xf32>) -> i64
  %a = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%c : f32) outs(%a : memref<4x8xf32>)
  call @wait(%ticket) : (i64) -> ()
  %slot = memref.subview %stack[%i, 0, 0] [1, 4, 8] [1, 1, 1] : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.copy %a, %slot : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.dealloc %a : memref<4x8xf32>
  return
}

// -----

// A caller passes one buffer as both stacks: writing one slot early could
// overwrite what the layer still reads from the other.
// CHECK-LABEL: func.func private @layer(
// CHECK:         memref.copy
// CHECK-LABEL: func.func @caller(
func.func private @layer(%in: memref<3x4x8xf32>, %out: memref<3x4x8xf32>, %i: index) {
  %a = memref.alloc() : memref<4x8xf32>
  %x = memref.subview %in[%i, 0, 0] [1, 4, 8] [1, 1, 1] : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  linalg.copy ins(%x : memref<4x8xf32, strided<[8, 1], offset: ?>>) outs(%a : memref<4x8xf32>)
  %slot = memref.subview %out[%i, 0, 0] [1, 4, 8] [1, 1, 1] : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.copy %a, %slot : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.dealloc %a : memref<4x8xf32>
  return
}
func.func @caller(%s: memref<3x4x8xf32>, %i: index) {
  call @layer(%s, %s, %i) : (memref<3x4x8xf32>, memref<3x4x8xf32>, index) -> ()
  return
}

// -----

// The buffer is read after the copy: it stays a buffer of its own.
// CHECK-LABEL: func.func @read_after(
// CHECK:         memref.copy
func.func private @use(memref<4x8xf32>)
func.func @read_after(%stack: memref<3x4x8xf32>, %i: index, %c: f32) {
  %a = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%c : f32) outs(%a : memref<4x8xf32>)
  %slot = memref.subview %stack[%i, 0, 0] [1, 4, 8] [1, 1, 1] : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.copy %a, %slot : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  call @use(%a) : (memref<4x8xf32>) -> ()
  memref.dealloc %a : memref<4x8xf32>
  return
}

// -----

// A call takes the buffer itself, whose type the slot's layout would
// change: the copy stays.
// CHECK-LABEL: func.func @call_takes_buffer(
// CHECK:         memref.copy
func.func private @use(memref<4x8xf32>)
func.func @call_takes_buffer(%stack: memref<3x4x8xf32>, %i: index) {
  %a = memref.alloc() : memref<4x8xf32>
  call @use(%a) : (memref<4x8xf32>) -> ()
  %slot = memref.subview %stack[%i, 0, 0] [1, 4, 8] [1, 1, 1] : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.copy %a, %slot : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.dealloc %a : memref<4x8xf32>
  return
}

// -----

// The same layer, its callers passing distinct buffers: the slot of %out
// is computed in place.
// CHECK-LABEL: func.func private @layer(
// CHECK-SAME:    %[[IN:.*]]: memref<3x4x8xf32>, %[[OUT:.*]]: memref<3x4x8xf32>, %[[I:.*]]: index)
// CHECK-NEXT:    %[[SLOT:.*]] = memref.subview %[[OUT]][%[[I]], 0, 0]
// CHECK-NEXT:    %[[X:.*]] = memref.subview %[[IN]][%[[I]], 0, 0]
// CHECK-NEXT:    linalg.copy ins(%[[X]] : {{.*}}) outs(%[[SLOT]] : {{.*}})
// CHECK-NEXT:    return
func.func private @layer(%in: memref<3x4x8xf32>, %out: memref<3x4x8xf32>, %i: index) {
  %a = memref.alloc() : memref<4x8xf32>
  %x = memref.subview %in[%i, 0, 0] [1, 4, 8] [1, 1, 1] : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  linalg.copy ins(%x : memref<4x8xf32, strided<[8, 1], offset: ?>>) outs(%a : memref<4x8xf32>)
  %slot = memref.subview %out[%i, 0, 0] [1, 4, 8] [1, 1, 1] : memref<3x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.copy %a, %slot : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  memref.dealloc %a : memref<4x8xf32>
  return
}
func.func @caller(%s: memref<3x4x8xf32>, %t: memref<3x4x8xf32>, %i: index) {
  call @layer(%s, %t, %i) : (memref<3x4x8xf32>, memref<3x4x8xf32>, index) -> ()
  return
}
