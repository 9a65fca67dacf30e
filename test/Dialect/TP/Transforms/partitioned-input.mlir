// The passes that plan and partition take the program at global shapes; a
// module tp-partition already made per-rank (tp.partitioned) is refused at
// its function, never misread.
// RUN: megatron-opt %s -tp-megatron-annotate=tp=2 -verify-diagnostics -o /dev/null
// RUN: megatron-opt %s -tp-propagate -verify-diagnostics -o /dev/null
// RUN: megatron-opt %s -tp-insert-conjugates -verify-diagnostics -o /dev/null
// RUN: megatron-opt %s -tp-export-logits -verify-diagnostics -o /dev/null
// RUN: megatron-opt %s -tp-partition -verify-diagnostics -o /dev/null
// RUN: not megatron-opt %s -tp-partition -o /dev/null 2>&1 | FileCheck %s
// CHECK: error: '@step' is already partitioned (a per-rank program); tp-partition takes the program at global shapes

tp.mesh @mesh axes = ["tp" = 2]
// expected-error @+1 {{'@step' is already partitioned (a per-rank program); tp-}}
func.func @step(%w: tensor<4x2xf32> {tp.global_shape = array<i64: 4, 4>, tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>},
                %x: tensor<3x4xf32>) -> tensor<3x2xf32> attributes {tp.partitioned} {
  %y = tp.matmul %x, %w : tensor<3x4xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}
