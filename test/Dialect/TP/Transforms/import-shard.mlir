// RUN: megatron-opt %s -split-input-file -tp-import-shard -verify-diagnostics | FileCheck %s

// Upstream shard annotations as tp shardings: a grid becomes a mesh of its
// name; an argument's or an op result's shard.shard its tp.sharding; one
// annotated for its users a tp.reshard.

// CHECK-LABEL: tp.mesh @grid axes = ["tp" = 2]
// CHECK-LABEL: func.func @annotated(
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<16x64xf32> {tp.sharding = #tp.sharding<@grid, {{\[\[}}], ["tp"]]>}
// CHECK-NOT: shard.
// CHECK: %[[H:[0-9]+]] = linalg.matmul {tp.sharding = #tp.sharding<@grid, {{\[\[}}], []]>} ins(%{{.+}}, %[[A]] :
// CHECK: %[[U:[0-9]+]] = tp.reshard %[[H]] {tp.sharding = #tp.sharding<@grid, {{\[}}["tp"], []]>} : tensor<8x64xf32>
// CHECK: return %[[U]]
shard.grid @grid(shape = 2)
func.func @annotated(%x: tensor<8x16xf32>, %a: tensor<16x64xf32>) -> tensor<8x64xf32> {
  %cst = arith.constant 0.0 : f32
  %sa = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %a_s = shard.shard %a to %sa : tensor<16x64xf32>
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %h = linalg.matmul ins(%x, %a_s : tensor<8x16xf32>, tensor<16x64xf32>) outs(%f : tensor<8x64xf32>) -> tensor<8x64xf32>
  %rep = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %h_s = shard.shard %h to %rep : tensor<8x64xf32>
  %rows = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %h_u = shard.shard %h_s to %rows annotate_for_users : tensor<8x64xf32>
  return %h_u : tensor<8x64xf32>
}

// -----

// A 2-d grid: data-parallel outer, tensor-parallel inner.
// CHECK-LABEL: tp.mesh @grid2 axes = ["dp" = 2, "tp" = 4]
// CHECK-LABEL: func.func @two_axes(
// CHECK-SAME: tensor<8x16xf32> {tp.sharding = #tp.sharding<@grid2, {{\[}}["dp"], ["tp"]]>}
shard.grid @grid2(shape = 2x4)
func.func @two_axes(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @grid2 split_axes = [[0], [1]] : !shard.sharding
  %x_s = shard.shard %x to %s : tensor<8x16xf32>
  return %x_s : tensor<8x16xf32>
}

// -----

// expected-error @+1 {{a grid of 3 axes has no tp mesh: tp meshes have a tensor-parallel axis and at most one data-parallel axis before it}}
shard.grid @cube(shape = 2x2x2)

// -----

shard.grid @grid(shape = 2)
func.func @halo(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{halos and uneven shards have no tp sharding}}
  %s = shard.sharding @grid split_axes = [[0]] halo_sizes = [1, 1] : !shard.sharding
  %x_s = shard.shard %x to %s : tensor<8x16xf32>
  return %x_s : tensor<8x16xf32>
}

// -----

shard.grid @grid(shape = 2)
func.func @twice(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %rows = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %cols = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %x to %rows : tensor<8x16xf32>
  // expected-error @+1 {{annotates a value already annotated #tp.sharding<@grid, [["tp"], []]>}}
  %b = shard.shard %x to %cols : tensor<8x16xf32>
  return %a, %b : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// expected-error @+1 {{a grid of dynamic shape has no tp mesh}}
shard.grid @open(shape = ?)

// -----

shard.grid @grid(shape = 2)
func.func @rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{splits 2 dimensions of a 1-d tensor}}
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %x_s = shard.shard %x to %s : tensor<8xf32>
  return %x_s : tensor<8xf32>
}

// -----

shard.grid @grid(shape = 2)
func.func @passed_in(%x: tensor<8xf32>, %s: !shard.sharding) -> tensor<8xf32> {
  // expected-error @+1 {{its sharding is no shard.sharding op}}
  %x_s = shard.shard %x to %s : tensor<8xf32>
  return %x_s : tensor<8xf32>
}

// -----

// Only the module's own grids are read.
module {
  module {
    shard.grid @inner(shape = 2)
    func.func @nested(%x: tensor<8xf32>) -> tensor<8xf32> {
      // expected-error @+1 {{the grid @inner is no shard.grid of the module}}
      %s = shard.sharding @inner split_axes = [[0]] : !shard.sharding
      %x_s = shard.shard %x to %s : tensor<8xf32>
      return %x_s : tensor<8xf32>
    }
  }
}
