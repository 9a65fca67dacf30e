// RUN: megatron-opt %s -split-input-file -tp-export-logits -verify-diagnostics | FileCheck %s
// RUN: megatron-opt %s -split-input-file -tp-export-logits -tp-partition -verify-diagnostics | FileCheck %s --check-prefix=LOCAL

// A tied LM head at global shapes, as tp-insert-conjugates leaves it: the
// logits entering the loss are also written into a new `logits` argument laid
// out as they are (split by vocabulary), returned as an update of it. The
// vocabulary is padded from 15 to 16, so the argument records its real
// columns.

// CHECK-LABEL: func.func @padded(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16x8xf32>
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<2x4xi32>
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: tensor<2x4x16xf32> {tp.name = "logits", tp.role = "logits", tp.sharding = #tp.sharding<@mesh, {{\[\[}}], [], ["tp"]]>, tp.unpadded_shape = array<i64: 2, 4, 15>})
// CHECK-SAME: -> (tensor<f32>, tensor<2x4x16xf32> {tp.updates = 2 : i64})
// CHECK: %[[LOGITS:.*]] = tp.matmul
// CHECK: %[[LOSS:.*]] = tp.cross_entropy %[[LOGITS]]
// CHECK: %[[WRITE:.*]] = bufferization.materialize_in_destination %[[LOGITS]] in %[[OUT]] {tp.sharding = #tp.sharding<@mesh, {{\[\[}}], [], ["tp"]]>} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
// CHECK: return %[[LOSS]], %[[WRITE]] : tensor<f32>, tensor<2x4x16xf32>

// Partitioned, each rank writes its own vocabulary columns.
// LOCAL-LABEL: func.func @padded(
// LOCAL-SAME: %{{[a-z0-9]+}}: tensor<2x4x8xf32> {tp.global_shape = array<i64: 2, 4, 16>, tp.name = "logits"
// LOCAL: bufferization.materialize_in_destination {{.*}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
tp.mesh @mesh axes = ["tp" = 2]
func.func @padded(%wte: tensor<16x8xf32> {tp.sharding = #tp.sharding<@mesh, [["tp"], []]>, tp.unpadded_shape = array<i64: 15, 8>},
                  %ids: tensor<2x4xi32> {tp.sharding = #tp.sharding<@mesh, [[], []]>}) -> tensor<f32> {
  %e = tp.embedding %wte[%ids] {tp.sharding = #tp.sharding<@mesh, [[], [], []], partial = ["tp"]>} : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %x = tp.g %e over @mesh["tp"] {tp.sharding = #tp.sharding<@mesh, [[], [], []]>} : tensor<2x4x8xf32>
  %xf = tp.f %x over @mesh["tp"] {tp.sharding = #tp.sharding<@mesh, [[], [], []]>} : tensor<2x4x8xf32>
  %l = tp.matmul %xf, %wte {tp.sharding = #tp.sharding<@mesh, [[], [], ["tp"]]>, transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %loss = tp.cross_entropy %l, %ids valid_vocab = 15 {tp.sharding = #tp.sharding<@mesh, []>} : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Without padding there is no tp.unpadded_shape; without a sharding the
// argument gets none.

// CHECK-LABEL: func.func @unsharded(
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: tensor<2x4x16xf32> {tp.name = "logits", tp.role = "logits"})
// CHECK-SAME: -> (tensor<f32>, tensor<2x4x16xf32> {tp.updates = 2 : i64})
// CHECK: %[[WRITE:.*]] = bufferization.materialize_in_destination %{{.*}} in %[[OUT]] :
// CHECK: return %{{.*}}, %[[WRITE]]
// LOCAL-LABEL: func.func @unsharded(
// LOCAL-SAME: tensor<2x4x16xf32> {tp.name = "logits", tp.role = "logits"})
func.func @unsharded(%l: tensor<2x4x16xf32>, %ids: tensor<2x4xi32>) -> tensor<f32> {
  %loss = tp.cross_entropy %l, %ids valid_vocab = 16 : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{tp-export-logits needs a tp.cross_entropy loss}}
func.func @no_loss(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}
