// RUN: megatron-opt %s -split-input-file -megatron-partition-pipeline -verify-diagnostics -o /dev/null

// An op no sharding rule covers runs replicated: a split operand is an
// error at the op, replicated operands a remark.

tp.mesh @mesh axes = ["tp" = 2]
func.func @split_into_concat(%x: tensor<1x8xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>}) -> tensor<2x8xf32> {
  // expected-error @+1 {{'tensor.concat' has no sharding rule, so it runs replicated, but its operand #0 is #tp.sharding<@mesh, [[], ["tp"]]>}}
  %r = tensor.concat dim(0) %x, %x : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

tp.mesh @mesh axes = ["tp" = 2]
func.func @replicated_concat(%x: tensor<1x8xf32> {tp.sharding = #tp.sharding<@mesh, [[], []]>}) -> tensor<2x8xf32> {
  // expected-remark @+1 {{'tensor.concat' has no sharding rule: it runs replicated}}
  %r = tensor.concat dim(0) %x, %x : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// A split linalg.index counts from one axis' offset.
#id = affine_map<(d0) -> (d0)>
tp.mesh @mesh axes = ["dp" = 2, "tp" = 2]
func.func @iota_two_axes(%x: tensor<8xf32> {tp.sharding = #tp.sharding<@mesh, [["dp", "tp"]]>}) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    // expected-error @+1 {{linalg.index of a loop split over several mesh axes (dp, tp) is not supported}}
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    %f = arith.sitofp %c : i64 to f32
    %s = arith.addf %in, %f : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// A sharding that does not divide its dimension.
tp.mesh @mesh axes = ["tp" = 4]
// expected-error @+1 {{dimension 1 of size 30 cannot be split into 4 shards}}
func.func @indivisible(%w: tensor<8x30xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>}) -> tensor<8x30xf32> {
  return %w : tensor<8x30xf32>
}
