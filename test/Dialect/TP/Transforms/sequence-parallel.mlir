// RUN: megatron-opt %s -tp-megatron-annotate="tp=2 sequence-parallel=true" -tp-propagate -tp-insert-conjugates -tp-partition -verify-diagnostics | FileCheck %s

// Sequence parallelism found, not written: tp-megatron-annotate splits the
// residual stream's sequence over "tp" (the input of each norm) and the
// weights as without it. Propagation keeps the norm on each rank's 4 of
// the 8 positions; the column-parallel GEMM, whose columns hold "tp",
// takes its input whole (a reshard, gathering it) through an f, and the
// row-parallel GEMM's sum is completed by a g and sliced back to the
// rank's positions. tp-partition's folds make these one collective each:
// the f of a gather a tp.sp_gather (its gradient a reduce-scatter), the
// slice of a g's sum a tp.reduce_scatter. The norm's weight reads each
// rank's positions only, so its gradient is summed over tp (its f).

// CHECK-LABEL: func.func @block(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4x16xf32> {tp.global_shape = array<i64: 2, 8, 16>
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<16xf32>
// CHECK: %[[GF:.*]] = tp.f %[[G]] over @mesh["tp"] : tensor<16xf32>
// CHECK: %[[N:.*]] = tp.rms_norm %[[X]], %[[GF]] : tensor<2x4x16xf32>, tensor<16xf32>
// CHECK: %[[NG:.*]] = tp.sp_gather %[[N]] over @mesh["tp"] dim = 1 : tensor<2x4x16xf32> -> tensor<2x8x16xf32>
// CHECK: %[[H:.*]] = tp.matmul %[[NG]], %{{.*}} : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
// CHECK: %[[A:.*]] = tp.gelu %[[H]]
// CHECK: %[[Y:.*]] = tp.matmul %[[A]], %{{.*}} : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
// CHECK: %[[YS:.*]] = tp.reduce_scatter sum %[[Y]] over @mesh["tp"] dim = 1 : tensor<2x8x16xf32> -> tensor<2x4x16xf32>
// CHECK: %[[R:.*]] = tp.add %[[X]], %[[YS]] : tensor<2x4x16xf32>
// CHECK: tp.rms_norm %[[R]], %[[GF]] : tensor<2x4x16xf32>, tensor<16xf32>
// CHECK-NOT: tp.g
// CHECK-NOT: tp.all_gather
func.func @block(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %w1: tensor<16x64xf32>, %w2: tensor<64x16xf32>) -> tensor<2x8x16xf32> {
  %n = tp.rms_norm %x, %g : tensor<2x8x16xf32>, tensor<16xf32>
  %h = tp.matmul %n, %w1 : tensor<2x8x16xf32>, tensor<16x64xf32> -> tensor<2x8x64xf32>
  %a = tp.gelu %h : tensor<2x8x64xf32>
  %y = tp.matmul %a, %w2 : tensor<2x8x64xf32>, tensor<64x16xf32> -> tensor<2x8x16xf32>
  // The residual add takes the split sequence over the row-parallel GEMM's
  // whole one: slicing a whole value is free.
  // expected-remark @+1 {{conflicting shardings of factor #1: kept ["tp"] over []; tensors that disagree are resharded}}
  %r = tp.add %x, %y : tensor<2x8x16xf32>
  %o = tp.rms_norm %r, %g : tensor<2x8x16xf32>, tensor<16xf32>
  return %o : tensor<2x8x16xf32>
}
