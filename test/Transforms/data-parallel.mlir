// Data parallelism is one more mesh axis: tp-megatron-annotate splits the
// tokens' and targets' batch over "dp", tp-propagate carries the split
// through every activation, tp-insert-conjugates puts an f over dp on each
// use of a parameter (whose gradient tp-autodiff then all-reduces over dp)
// and a g over dp on the loss, each rank's share of the mean over the whole
// batch (mean_over).
// RUN: megatron-opt %s -split-input-file -megatron-pipeline="tp=2 dp=2" -verify-diagnostics | FileCheck %s
// RUN: megatron-opt %s -split-input-file -megatron-pipeline="tp=2 dp=2" -tp-autodiff -verify-diagnostics | FileCheck %s --check-prefix=GRAD

// CHECK: tp.mesh @mesh axes = ["dp" = 2, "tp" = 2]
// CHECK-LABEL: func.func @lm(
// CHECK-SAME: %[[WTE:[a-z0-9]+]]: tensor<8x8xf32> {tp.global_shape = array<i64: 16, 8>, tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>}
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<2x4xi32> {tp.global_shape = array<i64: 4, 4>, tp.role = "tokens", tp.sharding = #tp.sharding<@mesh, {{\[}}["dp"], []]>}
// CHECK-SAME: %[[TGT:[a-z0-9]+]]: tensor<2x4xi32> {tp.global_shape = array<i64: 4, 4>, tp.role = "targets", tp.sharding = #tp.sharding<@mesh, {{\[}}["dp"], []]>}
// CHECK: %[[TABLE:.*]] = tp.f %[[WTE]] over @mesh["dp"]
// CHECK: tp.embedding %[[TABLE]][%[[IDS]]] offset %{{.*}} : tensor<8x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
// CHECK: %[[HEAD:.*]] = tp.f %[[WTE]] over @mesh["dp"]
// CHECK: tp.matmul %{{.*}}, %[[HEAD]] {transpose_rhs} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[SHARE:.*]] = tp.xent_loss %{{.*}} {mean_over = 16 : i64} : tensor<2x4xf32> -> tensor<f32>
// CHECK: %[[LOSS:.*]] = tp.g %[[SHARE]] over @mesh["dp"]
// CHECK: return %[[LOSS]]

// GRAD-LABEL: func.func @lm(
// GRAD: tp.xent_grad {{.*}} {mean_over = 16 : i64, tp.phase = "backward"}
// GRAD-COUNT-2: tp.all_reduce sum %{{.*}} over @mesh["dp"] {tp.phase = "backward"} : tensor<8x8xf32>
func.func @lm(%wte: tensor<16x8xf32>, %ids: tensor<4x4xi32> {tp.role = "tokens"},
              %targets: tensor<4x4xi32> {tp.role = "targets"}) -> tensor<f32> {
  %x = tp.embedding %wte[%ids] : tensor<16x8xf32>, tensor<4x4xi32> -> tensor<4x4x8xf32>
  %l = tp.matmul %x, %wte {transpose_rhs} : tensor<4x4x8xf32>, tensor<16x8xf32> -> tensor<4x4x16xf32>
  %loss = tp.cross_entropy %l, %targets valid_vocab = 16 : tensor<4x4x16xf32>, tensor<4x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A batch that dp does not divide is refused where the tokens are used.
func.func @indivisible(%wte: tensor<16x8xf32>, %ids: tensor<3x4xi32> {tp.role = "tokens"}) -> tensor<3x4x8xf32> {
  // expected-error @+1 {{'tp.embedding' op dimension 0 of size 3 cannot be split into 2 shards}}
  %x = tp.embedding %wte[%ids] : tensor<16x8xf32>, tensor<3x4xi32> -> tensor<3x4x8xf32>
  return %x : tensor<3x4x8xf32>
}

// -----

// expected-error @+1 {{mesh @mesh exists with another "dp" size than dp=2}}
tp.mesh @mesh axes = ["dp" = 4, "tp" = 2]
func.func @other_mesh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %x : tensor<4x8xf32>
}
