// RUN: megatron-opt %s -split-input-file -convert-shard-to-tp -verify-diagnostics | FileCheck %s
// RUN: megatron-opt %s -split-input-file -convert-shard-to-tp -convert-tp-to-shard -verify-diagnostics | FileCheck %s --check-prefix=ROUND

// Each shard op of a partitioned program as its tp counterpart over the
// mesh axis at the grid axis's position; index queries of no axes ask for
// every axis; the function is per-rank.
// CHECK-LABEL: tp.mesh @grid axes = ["dp" = 2, "tp" = 4]
// CHECK-LABEL: func.func @collectives(
// CHECK-SAME: %[[X:.+]]: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x64xf32>, tensor<2x16xf32>, tensor<8x4xf32>, index, index, index)
// CHECK-SAME: attributes {tp.partitioned}
// CHECK: %[[SUM:.+]] = tp.all_reduce sum %[[X]] over @grid["tp"] : tensor<8x16xf32>
// CHECK: %[[MAX:.+]] = tp.all_reduce max %[[SUM]] over @grid["dp"] : tensor<8x16xf32>
// CHECK: %[[GATHER:.+]] = tp.all_gather %[[X]] over @grid["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
// CHECK: %[[SCATTER:.+]] = tp.reduce_scatter sum %[[X]] over @grid["tp"] dim = 0 : tensor<8x16xf32> -> tensor<2x16xf32>
// CHECK: %[[SLICE:.+]] = tp.local_slice %[[X]] over @grid["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
// CHECK: %[[DP:.+]] = tp.axis_index @grid["dp"]
// CHECK: %[[TP:.+]] = tp.axis_index @grid["tp"]
// CHECK: %[[SIZE:.+]] = arith.constant 4 : index
// CHECK: return %[[MAX]], %[[GATHER]], %[[SCATTER]], %[[SLICE]], %[[DP]], %[[TP]], %[[SIZE]]
// And back: the same shard ops.
// ROUND-LABEL: shard.grid @grid(shape = 2x4)
// ROUND: shard.all_reduce %{{.+}} on @grid grid_axes = [1] :
// ROUND: shard.all_reduce %{{.+}} on @grid grid_axes = [0] reduction = max :
// ROUND: shard.all_gather %{{.+}} on @grid grid_axes = [1] gather_axis = 1 :
// ROUND: shard.reduce_scatter %{{.+}} on @grid grid_axes = [1] scatter_axis = 0 :
// ROUND: shard.all_slice %{{.+}} on @grid grid_axes = [1] slice_axis = 1 :
// ROUND: shard.process_multi_index on @grid axes = [0] : index
// ROUND: shard.process_multi_index on @grid axes = [1] : index
shard.grid @grid(shape = 2x4)
func.func @collectives(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x64xf32>, tensor<2x16xf32>, tensor<8x4xf32>, index, index, index) {
  %sum = shard.all_reduce %x on @grid grid_axes = [1] : tensor<8x16xf32> -> tensor<8x16xf32>
  %max = shard.all_reduce %sum on @grid grid_axes = [0] reduction = max : tensor<8x16xf32> -> tensor<8x16xf32>
  %gather = shard.all_gather %x on @grid grid_axes = [1] gather_axis = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  %scatter = shard.reduce_scatter %x on @grid grid_axes = [1] scatter_axis = 0 : tensor<8x16xf32> -> tensor<2x16xf32>
  %slice = shard.all_slice %x on @grid grid_axes = [1] slice_axis = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  %dp, %tp = shard.process_multi_index on @grid : index, index
  %size = shard.grid_shape @grid axes = [1] : index
  return %max, %gather, %scatter, %slice, %dp, %tp, %size : tensor<8x16xf32>, tensor<8x64xf32>, tensor<2x16xf32>, tensor<8x4xf32>, index, index, index
}

// -----

// What has no tp counterpart is an error at it.
shard.grid @grid(shape = 2x2)
func.func @unconvertible(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  // expected-error @+1 {{'shard.all_reduce' runs over 2 grid axes: a tp collective runs over one mesh axis}}
  %both = shard.all_reduce %x on @grid grid_axes = [0, 1] : tensor<8x16xf32> -> tensor<8x16xf32>
  // expected-error @+1 {{'shard.all_reduce' reduces by 'product': tp collectives sum or take the maximum}}
  %product = shard.all_reduce %x on @grid grid_axes = [1] reduction = product : tensor<8x16xf32> -> tensor<8x16xf32>
  // expected-error @+1 {{'shard.broadcast' has no tp counterpart: convert-shard-to-tp reads all-reduces, all-gathers, reduce-scatters, all-slices and the rank's index}}
  %bcast = shard.broadcast %x on @grid grid_axes = [1] root = [0] : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-error @+1 {{'shard.sharding' is a sharding annotation: convert-shard-to-tp reads a program upstream partitioned (tp-import-shard reads annotations)}}
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{'shard.shard' is a sharding annotation}}
  %a = shard.shard %x to %s : tensor<8x16xf32>
  return %both, %product, %bcast, %a : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}
