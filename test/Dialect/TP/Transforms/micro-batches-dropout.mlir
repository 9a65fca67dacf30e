// A dropout's rows in the global batch: the dp rank's, then the
// micro-batch's, which is the loop's iteration; its gradient draws the same.
// RUN: megatron-opt %s -megatron-pipeline="dp=2 micro-batches=2" -tp-autodiff -tp-micro-batches | FileCheck %s

// CHECK-LABEL: func.func @dropped(
// CHECK: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK: %[[DP:.*]] = tp.axis_index @mesh["dp"]
// CHECK: %[[MB_BASE:.*]] = arith.muli %[[DP]], %{{.*}} : index
// CHECK: %[[STREAM:.*]] = arith.constant 3 : index
// CHECK-NOT: @mesh["mb"]
// CHECK: scf.for %[[K:[a-z0-9]+]] =
// CHECK: %[[MB_ROW:.*]] = arith.addi %[[MB_BASE]], %[[K]] : index
// CHECK: %[[FIRST:.*]] = arith.muli %[[MB_ROW]], %{{.*}} : index
// CHECK: tp.dropout %{{.*}} dropout = 1.000000e-01 stream = %[[STREAM]] at [%[[FIRST]], %[[ZERO]], %[[ZERO]]] of [8, 4, 8] : tensor<2x4x8xf32>
// CHECK: tp.dropout %{{.*}} dropout = 1.000000e-01 stream = %[[STREAM]] at [%[[FIRST]], %[[ZERO]], %[[ZERO]]] of [8, 4, 8] {tp.phase = "backward"} : tensor<2x4x8xf32>
func.func @dropped(%wte: tensor<16x8xf32> {tp.name = "wte.weight"}, %ids: tensor<8x4xi32> {tp.role = "tokens"},
                   %targets: tensor<8x4xi32> {tp.role = "targets"}) -> tensor<f32> {
  %x = tp.embedding %wte[%ids] : tensor<16x8xf32>, tensor<8x4xi32> -> tensor<8x4x8xf32>
  %stream = arith.constant 3 : index
  %d = tp.dropout %x dropout = 0.1 stream = %stream : tensor<8x4x8xf32>
  %l = tp.matmul %d, %wte {transpose_rhs} : tensor<8x4x8xf32>, tensor<16x8xf32> -> tensor<8x4x16xf32>
  %loss = tp.cross_entropy %l, %targets valid_vocab = 16 : tensor<8x4x16xf32>, tensor<8x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
