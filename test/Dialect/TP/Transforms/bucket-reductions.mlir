// The gradients' sums over dp, grouped in program order into buckets of at
// most bucket-bytes (here 560: the 512-byte table and a 32-byte vector fill
// one, the next two vectors the second); a bucket ends before an op that reads
// one of its sums (the last vector is alone); other sums (over tp, or in the
// forward pass) stay apart.
// RUN: megatron-opt %s -split-input-file -tp-bucket-reductions=bucket-bytes=560 -verify-diagnostics | FileCheck %s
// RUN: not megatron-opt %s -split-input-file -tp-bucket-reductions=bucket-bytes=0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: bucket-bytes must be positive, got 0

tp.mesh @mesh axes = ["dp" = 2, "tp" = 2]
// CHECK-LABEL: func.func @grads(
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<16x8xf32>, %[[A:[a-z0-9]+]]: tensor<8xf32>, %[[B:[a-z0-9]+]]: tensor<8xf32>, %[[C:[a-z0-9]+]]: tensor<8xf32>, %[[D:[a-z0-9]+]]: tensor<8xf32>, %[[L:[a-z0-9]+]]: tensor<f32>
// CHECK: %[[LOSS:.*]] = tp.g %[[L]] over @mesh["dp"]
// CHECK: %[[TP:.*]] = tp.all_reduce sum %[[A]] over @mesh["tp"]
// CHECK: %[[DT:.*]]:2 = tp.all_reduce_bucket sum %[[T]], %[[A]] over @mesh["dp"] {tp.phase = "backward"} : tensor<16x8xf32>, tensor<8xf32>
// CHECK: %[[REST:.*]]:2 = tp.all_reduce_bucket sum %[[B]], %[[C]] over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>, tensor<8xf32>
// CHECK: %[[USE:.*]] = tp.add %[[REST]]#1, %[[TP]]
// CHECK: %[[LAST:.*]] = tp.all_reduce sum %[[D]] over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>
// CHECK: return %[[LOSS]], %[[DT]]#0, %[[DT]]#1, %[[REST]]#0, %[[USE]], %[[LAST]]
func.func @grads(%t: tensor<16x8xf32>, %a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>,
                 %d: tensor<8xf32>, %l: tensor<f32>)
    -> (tensor<f32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %loss = tp.g %l over @mesh["dp"] : tensor<f32>
  %over_tp = tp.all_reduce sum %a over @mesh["tp"] {tp.phase = "backward"} : tensor<8xf32>
  %dt = tp.all_reduce sum %t over @mesh["dp"] {tp.phase = "backward"} : tensor<16x8xf32>
  %da = tp.all_reduce sum %a over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>
  %db = tp.all_reduce sum %b over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>
  %dc = tp.all_reduce sum %c over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>
  %use = tp.add %dc, %over_tp : tensor<8xf32>
  %dd = tp.all_reduce sum %d over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>
  return %loss, %dt, %da, %db, %use, %dd : tensor<f32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// ZeRO-1's reduce-scatters by rows over dp bucket the same way, apart from
// the sums: 512 + 32 bytes of gradient fill one bucket, the next vector
// stays a plain reduce-scatter, and the sum over dp a plain all-reduce.
// CHECK-LABEL: func.func @zero(
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<16x8xf32>, %[[A:[a-z0-9]+]]: tensor<8xf32>, %[[B:[a-z0-9]+]]: tensor<8xf32>, %[[C:[a-z0-9]+]]: tensor<8xf32>
// CHECK: %[[SUM:.*]] = tp.all_reduce sum %[[C]] over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>
// CHECK: %[[LAST:.*]] = tp.reduce_scatter sum %[[B]] over @mesh["dp"] dim = 0 {tp.phase = "backward"} : tensor<8xf32> -> tensor<4xf32>
// CHECK: %[[ROWS:.*]]:2 = tp.reduce_scatter_bucket sum %[[T]], %[[A]] over @mesh["dp"] {tp.phase = "backward"} : tensor<16x8xf32>, tensor<8xf32> -> tensor<8x8xf32>, tensor<4xf32>
// CHECK: return %[[ROWS]]#0, %[[ROWS]]#1, %[[LAST]], %[[SUM]]
tp.mesh @mesh axes = ["dp" = 2, "tp" = 2]
func.func @zero(%t: tensor<16x8xf32>, %a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>)
    -> (tensor<8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) {
  %dt = tp.reduce_scatter sum %t over @mesh["dp"] dim = 0 {tp.phase = "backward"} : tensor<16x8xf32> -> tensor<8x8xf32>
  %da = tp.reduce_scatter sum %a over @mesh["dp"] dim = 0 {tp.phase = "backward"} : tensor<8xf32> -> tensor<4xf32>
  %dc = tp.all_reduce sum %c over @mesh["dp"] {tp.phase = "backward"} : tensor<8xf32>
  %db = tp.reduce_scatter sum %b over @mesh["dp"] dim = 0 {tp.phase = "backward"} : tensor<8xf32> -> tensor<4xf32>
  return %dt, %da, %db, %dc : tensor<8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>
}
