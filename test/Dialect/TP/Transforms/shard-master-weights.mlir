// bf16 with ZeRO-1 (tp-shard-master-weights after tp-mixed-precision): the
// table, which AdamW updates by its dp rows, is stored in bf16 (read by the
// forward and backward ops with no copy, also through the dp f), its fp32
// master weights are a new argument of its rows, laid out like the moments,
// which AdamW updates in place, and the all-gather writes their bf16
// rounding back. The layer norm's 5 rows, which dp does not divide, keep
// fp32 storage and their copies. The kept forward step takes the table in
// bf16 too. Per rank: parameters 200 -> 120 bytes, optimizer state 240 ->
// 320 (the master's 80), the dp all-gather 160 -> 80 bytes.
// RUN: megatron-opt %s -megatron-pipeline="tp=2 dp=2" -tp-keep-forward -tp-autodiff -tp-optimizer=zero=1 -tp-mixed-precision -tp-shard-master-weights | FileCheck %s
// RUN: megatron-opt %s -megatron-pipeline="tp=2 dp=2" -tp-keep-forward -tp-autodiff -tp-optimizer=zero=1 -tp-mixed-precision -tp-explain=json=- -o /dev/null > %t.json
// RUN: megatron-opt %s -megatron-pipeline="tp=2 dp=2" -tp-keep-forward -tp-autodiff -tp-optimizer=zero=1 -tp-mixed-precision -tp-shard-master-weights -tp-explain=json=- -o /dev/null >> %t.json
// RUN: FileCheck %s --check-prefix=EXPLAIN < %t.json

// CHECK-LABEL: func.func @lm(
// CHECK-SAME: %[[WTE:[a-z0-9]+]]: tensor<8x5xbf16> {{.*}}tp.name = "wte.weight"
// CHECK-SAME: %[[GAMMA:[a-z0-9]+]]: tensor<5xf32> {{.*}}tp.name = "ln.weight"
// CHECK-SAME: %[[MASTER:[a-z0-9]+]]: tensor<4x5xf32> {tp.global_shape = array<i64: 16, 5>, tp.name = "wte.weight.master", tp.param = "wte.weight", tp.role = "master", tp.sharding = #tp.sharding<@mesh, {{\[}}["tp", "dp"], []]>})
// CHECK-SAME: tensor<8x5xbf16> {tp.updates = 0 : i64}
// CHECK-SAME: tensor<4x5xf32> {tp.updates = 12 : i64})
// CHECK: %[[GAMMA_F:.*]] = tp.f %[[GAMMA]] over @mesh["dp"] : tensor<5xf32>
// CHECK: tp.convert %[[GAMMA_F]] : tensor<5xf32> -> tensor<5xbf16>
// CHECK: %[[TABLE:.*]] = tp.f %[[WTE]] over @mesh["dp"] : tensor<8x5xbf16>
// CHECK: tp.embedding %[[TABLE]]
// CHECK-NOT: tp.local_slice
// CHECK: %[[NEW:.*]], %[[M:.*]], %[[V:.*]] = tp.adamw %[[MASTER]],
// CHECK-NEXT: %[[ROUNDED:.*]] = tp.convert %[[NEW]] {tp.phase = "optimizer"} : tensor<4x5xf32> -> tensor<4x5xbf16>
// CHECK-NEXT: %[[ALL:.*]] = tp.all_gather %[[ROUNDED]] over @mesh["dp"] dim = 0 {tp.phase = "optimizer"} : tensor<4x5xbf16> -> tensor<8x5xbf16>
// CHECK: %[[WRITTEN:.*]] = bufferization.materialize_in_destination %[[ALL]] in %[[WTE]] {tp.phase = "optimizer"} : (tensor<8x5xbf16>, tensor<8x5xbf16>) -> tensor<8x5xbf16>
// CHECK: return %{{.*}}, %{{.*}}, %[[WRITTEN]], %[[M]], %[[V]], {{.*}}, %[[NEW]] :
// CHECK-LABEL: func.func @lm_forward(
// CHECK-SAME: %[[FWTE:[a-z0-9]+]]: tensor<8x5xbf16> {{.*}}tp.name = "wte.weight"
// CHECK-NOT: tp.convert %[[FWTE]]
// CHECK: tp.f %[[FWTE]] over @mesh["dp"] : tensor<8x5xbf16>

// EXPLAIN: "parameters": 200
// EXPLAIN: "optimizer": 240
// EXPLAIN: "dp": 368
// EXPLAIN: "parameters": 120
// EXPLAIN: "optimizer": 320
// EXPLAIN: "dp": 288
tp.mesh @mesh axes = ["dp" = 2, "tp" = 2]
func.func @lm(%wte: tensor<16x5xf32> {tp.name = "wte.weight"}, %gamma: tensor<5xf32> {tp.name = "ln.weight"},
              %beta: tensor<5xf32> {tp.name = "ln.bias"},
              %ids: tensor<4x4xi32> {tp.role = "tokens"}, %targets: tensor<4x4xi32> {tp.role = "targets"}) -> tensor<f32> {
  %x = tp.embedding %wte[%ids] : tensor<16x5xf32>, tensor<4x4xi32> -> tensor<4x4x5xf32>
  %h = tp.layer_norm %x, %gamma, %beta : tensor<4x4x5xf32>, tensor<5xf32>
  %l = tp.matmul %h, %wte {transpose_rhs} : tensor<4x4x5xf32>, tensor<16x5xf32> -> tensor<4x4x16xf32>
  %loss = tp.cross_entropy %l, %targets valid_vocab = 16 : tensor<4x4x16xf32>, tensor<4x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
