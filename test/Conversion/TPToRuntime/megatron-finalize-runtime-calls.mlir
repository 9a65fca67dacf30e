// RUN: megatron-opt %s -megatron-finalize-runtime-calls | FileCheck %s

// A buffer passed to the runtime becomes the address of its first element:
// aligned base plus the view's offset.

// CHECK-LABEL: func.func @call_with_view(
// CHECK-SAME: %[[BUF:.*]]: memref<8xf32>
// CHECK: %[[VIEW:.*]] = memref.subview %[[BUF]][4] [4] [1]
// CHECK: %[[FLAT:.*]] = memref.cast %[[VIEW]]
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[FLAT]]
// CHECK: %[[ADDR:.*]] = arith.index_cast %[[BASE]] : index to i64
// CHECK: %[[PTR:.*]] = llvm.inttoptr %[[ADDR]] : i64 to !llvm.ptr
// CHECK: %{{.*}}, %[[OFFSET:.*]], %{{.*}}, %{{.*}} = memref.extract_strided_metadata %[[FLAT]]
// CHECK: %[[OFF64:.*]] = arith.index_cast %[[OFFSET]] : index to i64
// CHECK: %[[FIRST:.*]] = llvm.getelementptr %[[PTR]][%[[OFF64]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: call @mrt_kernel_f32(%[[FIRST]], %{{[0-9]+}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64) -> ()
// CHECK: func.func private @mrt_kernel_f32(!llvm.ptr, !llvm.ptr, i64)
func.func @call_with_view(%buf: memref<8xf32>) {
  %view = memref.subview %buf[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
  %flat = memref.cast %view : memref<4xf32, strided<[1], offset: 4>> to memref<?xf32, strided<[1], offset: ?>>
  %n = arith.constant 4 : i64
  call @mrt_kernel_f32(%flat, %flat, %n) : (memref<?xf32, strided<[1], offset: ?>>, memref<?xf32, strided<[1], offset: ?>>, i64) -> ()
  return
}
func.func private @mrt_kernel_f32(memref<?xf32, strided<[1], offset: ?>>, memref<?xf32, strided<[1], offset: ?>>, i64)
