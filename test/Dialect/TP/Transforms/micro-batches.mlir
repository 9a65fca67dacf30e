// Gradient accumulation: tp-megatron-annotate splits each dp rank's rows
// again over an "mb" axis, tp-autodiff differentiates as if micro-batches
// were ranks, and tp-micro-batches runs them as a loop on one rank: the
// batch arguments hold the rank's rows, each iteration reads its rows, the
// sums over "mb" are carried (the loss as a scalar), and what reads them (the
// dp reductions, the loss's included) runs once after the loop.
// RUN: megatron-opt %s -split-input-file -megatron-pipeline="dp=2 micro-batches=2" -tp-autodiff -tp-micro-batches -verify-diagnostics | FileCheck %s
// RUN: megatron-opt %s -megatron-pipeline="dp=2" -tp-autodiff -tp-optimizer -tp-explain=json=- -o /dev/null > %t.json
// RUN: megatron-opt %s -megatron-pipeline="dp=2 micro-batches=2" -tp-autodiff -tp-micro-batches -tp-optimizer -tp-explain=json=- -o /dev/null >> %t.json
// RUN: FileCheck %s --check-prefix=EXPLAIN < %t.json
// RUN: not megatron-opt %s -split-input-file -megatron-pipeline="dp=2 micro-batches=3" 2>&1 | FileCheck %s --check-prefix=INDIVISIBLE
// INDIVISIBLE: error: the batch of 8 rows (tokens) cannot be split into dp=2 x micro-batches=3 = 6 equal parts
// RUN: not megatron-opt %s -split-input-file -megatron-pipeline="dp=4294967296 micro-batches=4294967296" 2>&1 | FileCheck %s --check-prefix=OVERFLOW
// OVERFLOW: error: {{.*}}the batch of 8 rows (tokens) cannot be split into dp=4294967296 x micro-batches=4294967296 parts: their product overflows 64 bits

// A step costs what it did in one batch: the loop's ops count once per
// micro-batch, and the dp traffic (the table's gradient, the loss) is the same.
// The activations the backward pass reads are one micro-batch's: the logits
// (4x4x16 f32, 1024 bytes, then 512), the embeddings (512, then 256), the
// loss's max and sum of exponentials (2 x 64, then 2 x 32), and the
// micro-batch's tokens and targets (2 x 32), which the arguments held before.
// EXPLAIN: "activations": 1664
// EXPLAIN: "comm_bytes_per_rank_per_step": {
// EXPLAIN-NEXT: "dp": [[DP:[0-9]+]]
// EXPLAIN: "forward": [[FWD:[0-9]+]],
// EXPLAIN-NEXT: "backward": [[BWD:[0-9]+]]
// EXPLAIN: "activations": 896
// EXPLAIN: "comm_bytes_per_rank_per_step": {
// EXPLAIN-NEXT: "dp": [[DP]]
// EXPLAIN: "forward": [[FWD]],
// EXPLAIN-NEXT: "backward": [[BWD]]

// CHECK: tp.mesh @mesh axes = ["dp" = 2, "tp" = 1]
// CHECK-LABEL: func.func @lm(
// CHECK-SAME: %[[WTE:[a-z0-9]+]]: tensor<16x8xf32>
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<4x4xi32> {tp.global_shape = array<i64: 8, 4>, tp.role = "tokens", tp.sharding = #tp.sharding<@mesh, {{\[}}["dp"], []]>}
// CHECK-SAME: %[[TGT:[a-z0-9]+]]: tensor<4x4xi32> {tp.global_shape = array<i64: 8, 4>, tp.role = "targets", tp.sharding = #tp.sharding<@mesh, {{\[}}["dp"], []]>}
// CHECK-NOT: over @mesh["mb"]
// CHECK: %[[TABLE:.*]] = tp.f %[[WTE]] over @mesh["dp"]
// CHECK-DAG: %[[LOSS0:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[GRAD0:.*]] = arith.constant dense<0.000000e+00> : tensor<16x8xf32>
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[SUMS:.*]]:2 = scf.for %[[K:.*]] = %{{.*}} to %[[C2]] step %{{.*}} iter_args(%[[LOSS:.*]] = %[[LOSS0]], %[[GRAD:.*]] = %[[GRAD0]]) -> (f32, tensor<16x8xf32>) {
// CHECK: %[[ROW:.*]] = arith.muli %[[K]], %{{.*}} : index
// CHECK: %[[MINE:.*]] = tensor.extract_slice %[[IDS]][%[[ROW]], 0] [2, 4] [1, 1] : tensor<4x4xi32> to tensor<2x4xi32>
// CHECK: tensor.extract_slice %[[TGT]]
// CHECK: tp.embedding %[[TABLE]][%[[MINE]]]
// CHECK: %[[SHARE:.*]] = tp.xent_loss %{{.*}} {mean_over = 32 : i64} : tensor<2x4xf32> -> tensor<f32>
// CHECK-NOT: over @mesh
// CHECK: %[[TERM:.*]] = tp.add
// CHECK: %[[SCALAR:.*]] = tensor.extract %[[SHARE]][] : tensor<f32>
// CHECK: %[[NEXT_LOSS:.*]] = arith.addf %[[LOSS]], %[[SCALAR]] : f32
// CHECK: %[[NEXT_GRAD:.*]] = tp.add %[[GRAD]], %[[TERM]] {tp.phase = "backward"} : tensor<16x8xf32>
// CHECK: scf.yield %[[NEXT_LOSS]], %[[NEXT_GRAD]] : f32, tensor<16x8xf32>
// CHECK: %[[TOTAL:.*]] = tensor.from_elements %[[SUMS]]#0 : tensor<f32>
// CHECK: %[[MEAN:.*]] = tp.g %[[TOTAL]] over @mesh["dp"] : tensor<f32>
// CHECK: %[[DW:.*]] = tp.all_reduce sum %[[SUMS]]#1 over @mesh["dp"] {tp.phase = "backward"} : tensor<16x8xf32>
// CHECK: return %[[MEAN]], %[[DW]]
func.func @lm(%wte: tensor<16x8xf32> {tp.name = "wte.weight"}, %ids: tensor<8x4xi32> {tp.role = "tokens"},
              %targets: tensor<8x4xi32> {tp.role = "targets"}) -> tensor<f32> {
  %x = tp.embedding %wte[%ids] : tensor<16x8xf32>, tensor<8x4xi32> -> tensor<8x4x8xf32>
  %l = tp.matmul %x, %wte {transpose_rhs} : tensor<8x4x8xf32>, tensor<16x8xf32> -> tensor<8x4x16xf32>
  %loss = tp.cross_entropy %l, %targets valid_vocab = 16 : tensor<8x4x16xf32>, tensor<8x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

