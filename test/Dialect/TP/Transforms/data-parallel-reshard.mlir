// RUN: megatron-opt %s -megatron-pipeline="tp=2 dp=2" | FileCheck %s

// A parameter resharded to the layout its op needs (a user's split of a
// layer norm's weight, gathered whole) still gets its f over dp.
// CHECK-LABEL: func.func @resharded(
// CHECK: %[[WHOLE:.*]] = tp.all_gather %{{.*}} over @mesh["tp"] dim = 0 : tensor<4xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[GAMMA:.*]] = tp.f %[[WHOLE]] over @mesh["dp"] : tensor<8xf32>
// CHECK-NEXT: tp.layer_norm %{{.*}}, %[[GAMMA]], %{{.*}} : tensor<2x8xf32>, tensor<8xf32>
tp.mesh @mesh axes = ["dp" = 2, "tp" = 2]
func.func @resharded(%x: tensor<4x8xf32> {tp.role = "tokens"},
                     %gamma: tensor<8xf32> {tp.name = "g", tp.sharding = #tp.sharding<@mesh, [["tp"]]>},
                     %beta: tensor<8xf32> {tp.name = "b"}) -> tensor<4x8xf32> {
  %y = tp.layer_norm %x, %gamma, %beta : tensor<4x8xf32>, tensor<8xf32>
  return %y : tensor<4x8xf32>
}
