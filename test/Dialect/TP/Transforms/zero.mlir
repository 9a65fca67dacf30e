// ZeRO-1 (tp-optimizer zero=1): a parameter's AdamW state holds its dp
// rank's rows. Its gradient is reduce-scattered over dp instead of
// all-reduced, AdamW updates the rank's rows of the parameter, and the rows
// are all-gathered and written back into it after every update (so that a
// gather can run under the later updates). The tied table, split over tp by rows, is
// split again within them; the layer norm's 5 rows, which dp does not divide,
// keep whole state. The norm sums each group's squares once over its axes.
// RUN: megatron-opt %s -megatron-pipeline="tp=2 dp=2" -tp-autodiff -tp-optimizer=zero=1 | FileCheck %s
// RUN: megatron-opt %s -megatron-pipeline="tp=2 dp=2" -tp-autodiff -tp-optimizer=zero=0 -tp-explain=json=- -o /dev/null > %t.json
// RUN: megatron-opt %s -megatron-pipeline="tp=2 dp=2" -tp-autodiff -tp-optimizer=zero=1 -tp-explain=json=- -o /dev/null >> %t.json
// RUN: FileCheck %s --check-prefix=EXPLAIN < %t.json

// CHECK-LABEL: func.func @lm(
// CHECK-SAME: %[[WTE:[a-z0-9]+]]: tensor<8x5xf32> {{.*}}tp.name = "wte.weight"
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<4x5xf32> {tp.global_shape = array<i64: 16, 5>, tp.name = "wte.weight.exp_avg", tp.param = "wte.weight", tp.role = "adam_m", tp.sharding = #tp.sharding<@mesh, {{\[}}["tp", "dp"], []]>}
// CHECK-SAME: %[[V:[a-z0-9]+]]: tensor<4x5xf32> {{.*}}tp.role = "adam_v", tp.sharding = #tp.sharding<@mesh, {{\[}}["tp", "dp"], []]>}
// CHECK-SAME: tensor<5xf32> {tp.global_shape = array<i64: 5>, tp.name = "ln.weight.exp_avg", tp.param = "ln.weight", tp.role = "adam_m", tp.sharding = #tp.sharding<@mesh, {{\[\[}}]]>}
// CHECK: %[[ROWS_GRAD:.*]] = tp.reduce_scatter sum %{{.*}} over @mesh["dp"] dim = 0 {tp.phase = "backward"} : tensor<8x5xf32> -> tensor<4x5xf32>
// CHECK: %[[LN_GRAD:.*]] = tp.all_reduce sum %{{.*}} over @mesh["dp"] {tp.phase = "backward"} : tensor<5xf32>
// CHECK: tp.sum_squares %[[LN_GRAD]], %{{.*}} {tp.phase = "optimizer"} : tensor<5xf32>, tensor<5xf32>
// CHECK: %[[ROWS_SQUARES:.*]] = tp.sum_squares %[[ROWS_GRAD]] {tp.phase = "optimizer"} : tensor<4x5xf32>
// CHECK: %[[PACKED:.*]] = tensor.from_elements %[[ROWS_SQUARES]]
// CHECK: %[[OVER_DP:.*]] = tp.all_reduce sum %[[PACKED]] over @mesh["dp"]
// CHECK: tp.all_reduce sum %{{.*}} over @mesh["tp"]
// CHECK: %[[MINE:.*]] = tp.local_slice %[[WTE]] over @mesh["dp"] dim = 0 {tp.phase = "optimizer"} : tensor<8x5xf32> -> tensor<4x5xf32>
// CHECK: %[[NEW:.*]], %[[NEW_M:.*]], %[[NEW_V:.*]] = tp.adamw %[[MINE]], %[[ROWS_GRAD]], %[[M]], %[[V]]
// CHECK: %[[GATHERED:.*]] = tp.all_gather %[[NEW]] over @mesh["dp"] dim = 0 {tp.phase = "optimizer"} : tensor<4x5xf32> -> tensor<8x5xf32>
// CHECK: tp.adamw %{{.*}}, %[[LN_GRAD]]
// CHECK: %[[WRITTEN:.*]] = bufferization.materialize_in_destination %[[GATHERED]] in %[[WTE]]
// CHECK: return %{{.*}}, %{{.*}}, %[[WRITTEN]], %[[NEW_M]], %[[NEW_V]],

// The state of the table halves (2 x 160 bytes to 2 x 80); the layer norm's
// (80 bytes) stays.
// EXPLAIN: "optimizer": 400
// EXPLAIN: "optimizer": 240
func.func @lm(%wte: tensor<16x5xf32> {tp.name = "wte.weight"}, %gamma: tensor<5xf32> {tp.name = "ln.weight"},
              %beta: tensor<5xf32> {tp.name = "ln.bias"},
              %ids: tensor<4x4xi32> {tp.role = "tokens"}, %targets: tensor<4x4xi32> {tp.role = "targets"}) -> tensor<f32> {
  %x = tp.embedding %wte[%ids] : tensor<16x5xf32>, tensor<4x4xi32> -> tensor<4x4x5xf32>
  %h = tp.layer_norm %x, %gamma, %beta : tensor<4x4x5xf32>, tensor<5xf32>
  %l = tp.matmul %h, %wte {transpose_rhs} : tensor<4x4x5xf32>, tensor<16x5xf32> -> tensor<4x4x16xf32>
  %loss = tp.cross_entropy %l, %targets valid_vocab = 16 : tensor<4x4x16xf32>, tensor<4x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
