// megatron-pipeline takes programs in the tp dialect. A linalg program (what
// frameworks lower to) or one with upstream shard annotations is refused
// at its first op of each kind, never passed through replicated.
// RUN: megatron-opt %s -split-input-file -megatron-pipeline=tp=2 -verify-diagnostics -o /dev/null

func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x16xf32>
  // expected-error @+1 {{'linalg.fill' is not part of a tp program: tp-megatron-annotate plans programs written in the tp dialect (with func, arith, tensor, math and bufferization); programs in the linalg dialect are not supported yet}}
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-error @+1 {{'linalg.matmul' is not part of a tp program}}
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// expected-error @+1 {{'shard.grid' is not part of a tp program: tp-megatron-annotate plans programs written in the tp dialect (with func, arith, tensor, math and bufferization); programs in the shard dialect are not supported yet}}
shard.grid @grid(shape = 2)
func.func @annotated(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'shard.sharding' is not part of a tp program}}
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  // expected-error @+1 {{'shard.shard' is not part of a tp program}}
  %y = shard.shard %x to %s : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
