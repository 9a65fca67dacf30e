// Data parallelism is one more mesh axis: tp-megatron-annotate splits the
// tokens' and targets' batch over "dp", tp-propagate carries the split
// through every activation, tp-insert-conjugates puts one f over dp on each
// parameter, shared by its uses (so tp-autodiff all-reduces its whole
// gradient once over dp, at the end of the backward pass), and a g over dp
// on the loss, each rank's share of the mean over the whole batch
// (mean_over). tp-explain counts the bytes each axis moves.
// RUN: megatron-opt %s -split-input-file -megatron-pipeline="tp=2 dp=2" -verify-diagnostics | FileCheck %s
// RUN: megatron-opt %s -split-input-file -megatron-pipeline="tp=2 dp=2" -tp-autodiff -verify-diagnostics | FileCheck %s --check-prefix=GRAD
// RUN: megatron-opt %s -split-input-file -megatron-pipeline="tp=2 dp=2" -tp-autodiff -tp-optimizer -tp-explain=json=- -verify-diagnostics -o /dev/null | FileCheck %s --check-prefix=EXPLAIN

// CHECK: tp.mesh @mesh axes = ["dp" = 2, "tp" = 2]
// CHECK-LABEL: func.func @lm(
// CHECK-SAME: %[[WTE:[a-z0-9]+]]: tensor<8x8xf32> {tp.global_shape = array<i64: 16, 8>, tp.name = "wte.weight", tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>}
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<2x4xi32> {tp.global_shape = array<i64: 4, 4>, tp.role = "tokens", tp.sharding = #tp.sharding<@mesh, {{\[}}["dp"], []]>}
// CHECK-SAME: %[[TGT:[a-z0-9]+]]: tensor<2x4xi32> {tp.global_shape = array<i64: 4, 4>, tp.role = "targets", tp.sharding = #tp.sharding<@mesh, {{\[}}["dp"], []]>}
// CHECK-NEXT: %[[TABLE:.*]] = tp.f %[[WTE]] over @mesh["dp"]
// CHECK: tp.embedding %[[TABLE]][%[[IDS]]] offset %{{.*}} : tensor<8x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
// CHECK-NOT: tp.f %[[WTE]]
// CHECK: tp.matmul %{{.*}}, %[[TABLE]] {transpose_rhs} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[SHARE:.*]] = tp.xent_loss %{{.*}} {mean_over = 16 : i64} : tensor<2x4xf32> -> tensor<f32>
// CHECK: %[[LOSS:.*]] = tp.g %[[SHARE]] over @mesh["dp"]
// CHECK: return %[[LOSS]]

// The tied table's two uses are summed, then all-reduced over dp once, last.
// GRAD-LABEL: func.func @lm(
// GRAD: tp.xent_grad {{.*}} {mean_over = 16 : i64, tp.phase = "backward"}
// GRAD: %[[SUM:.*]] = tp.add
// GRAD-NEXT: %[[DW:.*]] = tp.all_reduce sum %[[SUM]] over @mesh["dp"] {tp.phase = "backward"} : tensor<8x8xf32>
// GRAD-NEXT: return %{{.*}}, %[[DW]]

// Per rank: the table's [8, 8] f32 half is 256 bytes, as its gradient; AdamW
// keeps two moments. Over dp: its gradient once (256) and the loss (4). Over
// tp: the embedding's g (2x4x8 f32, 256), the loss's three [2, 4] all-reduces
// (96), f's backward all-reduce (256), the gradient norm's square sum (4).
// EXPLAIN: "tp": 2,
// EXPLAIN-NEXT: "dp": 2,
// EXPLAIN: "bytes_per_rank": {
// EXPLAIN-NEXT: "parameters": 256,
// EXPLAIN-NEXT: "gradients": 256,
// EXPLAIN-NEXT: "optimizer": 512
// EXPLAIN: "comm_bytes_per_rank_per_step": {
// EXPLAIN-NEXT: "dp": 260,
// EXPLAIN-NEXT: "tp": 612
func.func @lm(%wte: tensor<16x8xf32> {tp.name = "wte.weight"}, %ids: tensor<4x4xi32> {tp.role = "tokens"},
              %targets: tensor<4x4xi32> {tp.role = "targets"}) -> tensor<f32> {
  %x = tp.embedding %wte[%ids] : tensor<16x8xf32>, tensor<4x4xi32> -> tensor<4x4x8xf32>
  %l = tp.matmul %x, %wte {transpose_rhs} : tensor<4x4x8xf32>, tensor<16x8xf32> -> tensor<4x4x16xf32>
  %loss = tp.cross_entropy %l, %targets valid_vocab = 16 : tensor<4x4x16xf32>, tensor<4x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A batch that dp does not divide is refused at the tokens, with the numbers.
// expected-error @+1 {{the batch of 3 rows (tokens) cannot be split into dp=2 x micro-batches=1 = 2 equal parts}}
func.func @indivisible(%wte: tensor<16x8xf32>, %ids: tensor<3x4xi32> {tp.role = "tokens"}) -> tensor<3x4x8xf32> {
  %x = tp.embedding %wte[%ids] : tensor<16x8xf32>, tensor<3x4xi32> -> tensor<3x4x8xf32>
  return %x : tensor<3x4x8xf32>
}

// -----

// expected-error @+1 {{mesh @mesh exists with another "dp" size than dp=2}}
tp.mesh @mesh axes = ["dp" = 4, "tp" = 2]
func.func @other_mesh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %x : tensor<4x8xf32>
}

