// tp-partition rewrites each op from the shardings of its operands and
// results: without tp-propagate a result has none, and the op would keep its
// global shape beside a local operand. It is refused at the op.
// RUN: megatron-opt %s -tp-partition -verify-diagnostics -o /dev/null

tp.mesh @mesh axes = ["tp" = 2]
func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x16xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>}) -> tensor<4x16xf32> {
  // expected-error @+1 {{'tp.matmul' op has a result without a sharding: tp-partition needs one on every value (tp-propagate completes them)}}
  %y = tp.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
