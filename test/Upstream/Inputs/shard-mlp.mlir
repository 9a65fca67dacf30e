// Input for ../shard-mlp-contrast.mlir (upstream mlir-opt-22 side).
// Y = tanh(X * A) * B on a grid of 4; X [8,16], A [16,64], B [64,16].

// Only A is annotated (column split). Y's accumulator comes in as an argument:
// with tensor.empty + linalg.fill there, LLVM 22's shard-partition segfaults
// (in shard::shardShapedType) because sharding-propagation leaves that fill
// unannotated.
shard.grid @grid(shape = 4)
func.func @mlp_only_a(%x: tensor<8x16xf32>, %a: tensor<16x64xf32>, %b: tensor<64x16xf32>, %y0: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %cst = arith.constant 0.0 : f32
  %sa = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %a_s = shard.shard %a to %sa : tensor<16x64xf32>
  %e0 = tensor.empty() : tensor<8x64xf32>
  %h0 = linalg.fill ins(%cst : f32) outs(%e0 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %h = linalg.matmul ins(%x, %a_s : tensor<8x16xf32>, tensor<16x64xf32>) outs(%h0 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %e1 = tensor.empty() : tensor<8x64xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<8x64xf32>) outs(%e1 : tensor<8x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = math.tanh %in : f32
    linalg.yield %t : f32
  } -> tensor<8x64xf32>
  %y = linalg.matmul ins(%g, %b : tensor<8x64xf32>, tensor<64x16xf32>) outs(%y0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A annotated (column split), X and Y pinned replicated.
shard.grid @grid(shape = 4)
func.func @mlp_pinned(%x: tensor<8x16xf32>, %a: tensor<16x64xf32>, %b: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %cst = arith.constant 0.0 : f32
  %rep = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %x_s = shard.shard %x to %rep : tensor<8x16xf32>
  %sa = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %a_s = shard.shard %a to %sa : tensor<16x64xf32>
  %e0 = tensor.empty() : tensor<8x64xf32>
  %h0 = linalg.fill ins(%cst : f32) outs(%e0 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %h = linalg.matmul ins(%x_s, %a_s : tensor<8x16xf32>, tensor<16x64xf32>) outs(%h0 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %e1 = tensor.empty() : tensor<8x64xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<8x64xf32>) outs(%e1 : tensor<8x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = math.tanh %in : f32
    linalg.yield %t : f32
  } -> tensor<8x64xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %y0 = linalg.fill ins(%cst : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%g, %b : tensor<8x64xf32>, tensor<64x16xf32>) outs(%y0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y_s = shard.shard %y to %rep : tensor<8x16xf32>
  return %y_s : tensor<8x16xf32>
}
