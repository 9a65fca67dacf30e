// RUN: megatron-opt %s -split-input-file -megatron-plan-buffers | FileCheck %s

// Buffers dead before the next is allocated share the arena's first bytes;
// the arena is allocated first and freed before the return.
// CHECK-LABEL: func.func @disjoint(
// CHECK-NEXT:    %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<64xi8>
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[A:.*]] = memref.view %[[ARENA]][%[[C0]]][] : memref<64xi8> to memref<16xf32>
// CHECK-NEXT:    call @fill(%[[A]])
// CHECK-NEXT:    %[[C0B:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[B:.*]] = memref.view %[[ARENA]][%[[C0B]]][] : memref<64xi8> to memref<16xf32>
// CHECK-NEXT:    call @fill(%[[B]])
// CHECK-NEXT:    memref.dealloc %[[ARENA]]
// CHECK-NEXT:    return
func.func private @fill(memref<16xf32>)
func.func @disjoint() {
  %a = memref.alloc() : memref<16xf32>
  call @fill(%a) : (memref<16xf32>) -> ()
  memref.dealloc %a : memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  call @fill(%b) : (memref<16xf32>) -> ()
  memref.dealloc %b : memref<16xf32>
  return
}

// -----

// Buffers alive at once do not overlap: the largest is placed first, at 0,
// the next at the first 64-byte boundary after it; the bf16 buffer's 20
// bytes take 64.
// CHECK-LABEL: func.func @overlapping(
// CHECK-NEXT:    %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<320xi8>
// CHECK-NEXT:    %[[C256:.*]] = arith.constant 256 : index
// CHECK-NEXT:    %[[SMALL:.*]] = memref.view %[[ARENA]][%[[C256]]][] : memref<320xi8> to memref<10xbf16>
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[BIG:.*]] = memref.view %[[ARENA]][%[[C0]]][] : memref<320xi8> to memref<8x8xf32>
// CHECK-NEXT:    call @use(%[[SMALL]], %[[BIG]])
func.func private @use(memref<10xbf16>, memref<8x8xf32>)
func.func @overlapping() {
  %small = memref.alloc() : memref<10xbf16>
  %big = memref.alloc() : memref<8x8xf32>
  call @use(%small, %big) : (memref<10xbf16>, memref<8x8xf32>) -> ()
  memref.dealloc %small : memref<10xbf16>
  memref.dealloc %big : memref<8x8xf32>
  return
}

// -----

// Only buffers the block frees are planned: one returned, one freed in a
// region and one of a dynamic size keep their allocations, and a single
// plannable buffer gains nothing from an arena.
// CHECK-LABEL: func.func @unplanned(
// CHECK-NOT:     memref.view
// CHECK-NOT:     xi8>
// CHECK:         return
func.func private @fill(memref<16xf32>)
func.func @unplanned(%n: index, %c: i1) -> memref<16xf32> {
  %returned = memref.alloc() : memref<16xf32>
  %nested = memref.alloc() : memref<16xf32>
  scf.if %c {
    memref.dealloc %nested : memref<16xf32>
  }
  %dynamic = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %dynamic : memref<?xf32>
  %alone = memref.alloc() : memref<16xf32>
  call @fill(%alone) : (memref<16xf32>) -> ()
  memref.dealloc %alone : memref<16xf32>
  return %returned : memref<16xf32>
}
