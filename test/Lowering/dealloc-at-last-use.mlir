// RUN: megatron-opt %s -split-input-file -megatron-dealloc-at-last-use | FileCheck %s

// Each free moves to right after the last op that reads its buffer, so the
// first buffer is free before the second is allocated.
// CHECK-LABEL: func.func @two_buffers(
// CHECK-NEXT:    %[[A:.*]] = memref.alloc()
// CHECK-NEXT:    call @fill(%[[A]])
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    %[[B:.*]] = memref.alloc()
// CHECK-NEXT:    call @fill(%[[B]])
// CHECK-NEXT:    memref.dealloc %[[B]]
// CHECK-NEXT:    return
func.func private @fill(memref<16xf32>)
func.func @two_buffers() {
  %a = memref.alloc() : memref<16xf32>
  call @fill(%a) : (memref<16xf32>) -> ()
  %b = memref.alloc() : memref<16xf32>
  call @fill(%b) : (memref<16xf32>) -> ()
  memref.dealloc %a : memref<16xf32>
  memref.dealloc %b : memref<16xf32>
  return
}

// -----

// What is derived from a buffer keeps it alive: a view read later, and a
// started collective's handle, which its wait reads after the buffer's
// last direct use.
// CHECK-LABEL: func.func @derived(
// CHECK:         %[[A:.*]] = memref.alloc()
// CHECK:         %[[V:.*]] = memref.subview %[[A]]
// CHECK:         %[[H:.*]] = call @start(%[[A]])
// CHECK-NEXT:    call @compute()
// CHECK-NEXT:    call @wait(%[[H]])
// CHECK-NEXT:    call @read(%[[V]])
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    call @compute()
// CHECK-NEXT:    return
func.func private @start(memref<16xf32>) -> i64
func.func private @wait(i64)
func.func private @compute()
func.func private @read(memref<8xf32, strided<[1], offset: 8>>)
func.func @derived() {
  %a = memref.alloc() : memref<16xf32>
  %v = memref.subview %a[8] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1], offset: 8>>
  %h = call @start(%a) : (memref<16xf32>) -> i64
  call @compute() : () -> ()
  call @wait(%h) : (i64) -> ()
  call @read(%v) : (memref<8xf32, strided<[1], offset: 8>>) -> ()
  call @compute() : () -> ()
  memref.dealloc %a : memref<16xf32>
  return
}

// -----

// A buffer a region op reads is freed after that op; one whose view leaves
// the block, and a free of an argument, stay where they were.
// CHECK-LABEL: func.func @stays(
// CHECK-SAME:      %[[ARG:.*]]: memref<16xf32>, %[[C:.*]]: i1)
// CHECK:         %[[A:.*]] = memref.alloc()
// CHECK:         %[[B:.*]] = memref.alloc()
// CHECK-NEXT:    scf.if %[[C]] {
// CHECK-NEXT:      func.call @fill(%[[A]])
// CHECK-NEXT:    }
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    %[[CAST:.*]] = memref.cast %[[B]]
// CHECK-NEXT:    call @fill(%[[ARG]])
// CHECK-NEXT:    memref.dealloc %[[B]]
// CHECK-NEXT:    memref.dealloc %[[ARG]]
// CHECK-NEXT:    return %[[CAST]]
func.func private @fill(memref<16xf32>)
func.func @stays(%arg: memref<16xf32>, %c: i1) -> memref<?xf32> {
  %a = memref.alloc() : memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  scf.if %c {
    func.call @fill(%a) : (memref<16xf32>) -> ()
  }
  %cast = memref.cast %b : memref<16xf32> to memref<?xf32>
  call @fill(%arg) : (memref<16xf32>) -> ()
  memref.dealloc %a : memref<16xf32>
  memref.dealloc %b : memref<16xf32>
  memref.dealloc %arg : memref<16xf32>
  return %cast : memref<?xf32>
}
