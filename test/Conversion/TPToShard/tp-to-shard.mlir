// RUN: megatron-opt %s -split-input-file -convert-tp-to-shard -verify-diagnostics | FileCheck %s
// RUN: megatron-opt %s -split-input-file -convert-tp-to-shard -verify-diagnostics | /usr/lib/llvm-22/bin/mlir-opt -split-input-file -verify-diagnostics -o /dev/null

// Each tp collective as upstream's over the grid axis at its mesh axis's
// position; f is the identity; the tp attributes are gone. The output
// parses and verifies with upstream's mlir-opt.
// CHECK-LABEL: shard.grid @mesh(shape = 2x4)
// CHECK-NOT: tp.
// CHECK-LABEL: func.func @collectives(
// CHECK-SAME: %[[X:.+]]: tensor<8x16xf32>, %[[G:.+]]: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x64xf32>, tensor<2x16xf32>, tensor<8x4xf32>, index, tensor<16xf32>) {
// CHECK: %[[SUM:.+]] = shard.all_reduce %[[X]] on @mesh grid_axes = [1] : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK: %[[MAX:.+]] = shard.all_reduce %[[SUM]] on @mesh grid_axes = [1] reduction = max : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK: %[[GATHER:.+]] = shard.all_gather %[[X]] on @mesh grid_axes = [1] gather_axis = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
// CHECK: %[[SCATTER:.+]] = shard.reduce_scatter %[[X]] on @mesh grid_axes = [1] scatter_axis = 0 : tensor<8x16xf32> -> tensor<2x16xf32>
// CHECK: %[[SLICE:.+]] = shard.all_slice %[[X]] on @mesh grid_axes = [1] slice_axis = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
// CHECK: %[[RANK:.+]] = shard.process_multi_index on @mesh axes = [0] : index
// CHECK: %[[BUCKET:.+]] = shard.all_reduce %[[G]] on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
// CHECK: return %[[MAX]], %[[GATHER]], %[[SCATTER]], %[[SLICE]], %[[RANK]], %[[BUCKET]]
tp.mesh @mesh axes = ["dp" = 2, "tp" = 4]
func.func @collectives(%x: tensor<8x16xf32> {tp.global_shape = array<i64: 8, 64>, tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>, tp.name = "arg0"},
                       %g: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x64xf32>, tensor<2x16xf32>, tensor<8x4xf32>, index, tensor<16xf32>)
    attributes {tp.partitioned} {
  %f = tp.f %x over @mesh["tp"] : tensor<8x16xf32>
  %sum = tp.g %f over @mesh["tp"] : tensor<8x16xf32>
  %max = tp.all_reduce max %sum over @mesh["tp"] : tensor<8x16xf32>
  %gather = tp.all_gather %x over @mesh["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  %scatter = tp.reduce_scatter sum %x over @mesh["tp"] dim = 0 : tensor<8x16xf32> -> tensor<2x16xf32>
  %slice = tp.local_slice %x over @mesh["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  %rank = tp.axis_index @mesh["dp"]
  %bucket = tp.all_reduce_bucket sum %g over @mesh["dp"] : tensor<16xf32>
  return %max, %gather, %scatter, %slice, %rank, %bucket : tensor<8x16xf32>, tensor<8x64xf32>, tensor<2x16xf32>, tensor<8x4xf32>, index, tensor<16xf32>
}

// -----

// ZeRO-1's rows over dp, bucketed or started: one shard collective each,
// where the bucket or the start stands.
// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %[[A:.+]]: tensor<8x16xf32>, %[[B:.+]]: tensor<4xf32>)
// CHECK: %[[RA:.+]] = shard.reduce_scatter %[[A]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK: %[[RB:.+]] = shard.reduce_scatter %[[B]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4xf32> -> tensor<2xf32>
// CHECK: %[[SA:.+]] = shard.reduce_scatter %[[A]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK: %[[GA:.+]] = shard.all_gather %[[SA]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
// CHECK: return %[[RA]], %[[RB]], %[[GA]]
tp.mesh @mesh axes = ["dp" = 2, "tp" = 4]
func.func @rows(%a: tensor<8x16xf32>, %b: tensor<4xf32>) -> (tensor<4x16xf32>, tensor<2xf32>, tensor<8x16xf32>)
    attributes {tp.partitioned} {
  %r:2 = tp.reduce_scatter_bucket sum %a, %b over @mesh["dp"] : tensor<8x16xf32>, tensor<4xf32> -> tensor<4x16xf32>, tensor<2xf32>
  %p = tp.reduce_scatter_start sum %a over @mesh["dp"] : tensor<8x16xf32>
  %mine = tp.wait %p : tensor<4x16xf32>
  %q = tp.all_gather_start %mine over @mesh["dp"] : tensor<4x16xf32>
  %whole = tp.wait %q : tensor<8x16xf32>
  return %r#0, %r#1, %whole : tensor<4x16xf32>, tensor<2xf32>, tensor<8x16xf32>
}

// -----

// The tp dialect's own ops have no shard counterpart.
tp.mesh @mesh axes = ["tp" = 2]
func.func @own_ops(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> attributes {tp.partitioned} {
  // expected-error @+1 {{'tp.matmul' has no shard counterpart: convert-tp-to-shard exports the collectives of a partitioned linalg program (megatron-compile lowers the tp dialect's own ops)}}
  %y = tp.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// At global shapes, the shardings to plan from become upstream's
// annotations: the arguments' at the start, an op result's after the op.
// CHECK-LABEL: shard.grid @mesh(shape = 2)
// CHECK-LABEL: func.func @to_plan(
// CHECK-SAME: %[[X:.+]]: tensor<8x16xf32>, %[[W:.+]]: tensor<16x64xf32>) -> tensor<8x64xf32> {
// CHECK: %[[S:.+]] = shard.sharding @mesh split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK: %[[WS:.+]] = shard.shard %[[W]] to %[[S]] : tensor<16x64xf32>
// CHECK: %[[Y:.+]] = linalg.matmul ins(%[[X]], %[[WS]] : {{.*}}) outs(
// CHECK: %[[R:.+]] = shard.sharding @mesh split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK: %[[YS:.+]] = shard.shard %[[Y]] to %[[R]] : tensor<8x64xf32>
// CHECK: return %[[YS]]
tp.mesh @mesh axes = ["tp" = 2]
func.func @to_plan(%x: tensor<8x16xf32>, %w: tensor<16x64xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>}) -> tensor<8x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<8x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = linalg.matmul {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>} ins(%x, %w : tensor<8x16xf32>, tensor<16x64xf32>) outs(%init : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// A collective at global shapes is where a plan will communicate, not what
// a rank runs.
tp.mesh @mesh axes = ["tp" = 2]
func.func @conjugates(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'tp.g' in a program at global shapes: convert-tp-to-shard exports the collectives of a partitioned program, or the shardings of one to plan}}
  %y = tp.g %x over @mesh["tp"] : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Sections (Megatron's fused QKV split) have no shard annotation.
tp.mesh @mesh axes = ["tp" = 2]
// expected-error @+1 {{#tp.sharding<@mesh, [[], ["tp"]], sections = [1, 3]> has sections or pending sums, which shard annotations cannot state}}
func.func @sections(%w: tensor<16x96xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]], sections = [1, 3]>}) -> tensor<16x96xf32> {
  return %w : tensor<16x96xf32>
}

// -----

// A grid's axes are whole: a mesh factored into sub-axes (grouped-query
// attention's at more ranks than key/value heads) has no grid.
// expected-error @+1 {{mesh @mesh factors an axis into sub-axes, which a shard grid cannot state}}
tp.mesh @mesh axes = ["tp" = 4 ["tp_kv" = 2, "tp_rep" = 2]]
func.func @sub_axes(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  return %x : tensor<8x16xf32>
}
