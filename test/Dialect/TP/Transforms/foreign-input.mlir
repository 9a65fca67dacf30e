// The planner (megatron-pipeline) takes programs in the tp dialect; a linalg
// program is refused there, with the pipeline that takes it named. Both
// pipelines refuse ops from other dialects at the first op of each kind,
// never passing them through replicated: upstream shard annotations in the
// planner's, a shard collective in megatron-partition-pipeline (which reads
// the annotations, tp-import-shard).
// RUN: megatron-opt %s -split-input-file -megatron-pipeline=tp=2 -verify-diagnostics -o /dev/null
// RUN: not megatron-opt %s -split-input-file -megatron-partition-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARTITION

func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x16xf32>
  // expected-error @+1 {{'linalg.fill' is not part of a program tp-megatron-annotate takes: it takes the tp dialects (with func, arith, tensor, math and bufferization), not the linalg dialect; a linalg program is partitioned from the tp.sharding of its arguments (megatron-partition-pipeline)}}
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-error @+1 {{'linalg.matmul' is not part of a program tp-megatron-annotate takes}}
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// PARTITION: error: 'shard.all_reduce' is no sharding annotation: tp-import-shard reads shard.grid, shard.sharding and shard.shard, and plans programs upstream has not partitioned
// expected-error @+1 {{'shard.grid' is not part of a program tp-megatron-annotate takes: it takes the tp dialects (with func, arith, tensor, math and bufferization), not the shard dialect}}
shard.grid @grid(shape = 2)
func.func @annotated(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'shard.sharding' is not part of a program}}
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  // expected-error @+1 {{'shard.shard' is not part of a program}}
  %y = shard.shard %x to %s : tensor<4x8xf32>
  // expected-error @+1 {{'shard.all_reduce' is not part of a program}}
  %r = shard.all_reduce %y on @grid grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
