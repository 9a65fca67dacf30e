// RUN: megatron-opt %s -split-input-file -tp-function-entry -verify-diagnostics | FileCheck %s
// RUN: megatron-opt %s -split-input-file -tp-function-entry -megatron-partition-pipeline -verify-diagnostics | FileCheck %s --check-prefix=PARTITIONED

// A framework's function as the step's entry: its arguments are the inputs
// arg0, arg1 by position, each result is written into a new output argument
// and returned as its update.

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.+]]: tensor<4x8xf32> {tp.name = "arg0", tp.role = "input", tp.sharding = #tp.sharding<@mesh, {{\[\[}}], ["tp"]]>}
// CHECK-SAME: %[[S:.+]]: tensor<f32> {tp.name = "arg1", tp.role = "input"}
// CHECK-SAME: %[[OUT0:.+]]: tensor<4x8xf32> {tp.name = "result0", tp.role = "output"}
// CHECK-SAME: %[[OUT1:.+]]: tensor<f32> {tp.name = "result1", tp.role = "output"}
// CHECK-SAME: -> (tensor<4x8xf32> {tp.updates = 2 : i64}, tensor<f32> {tp.updates = 3 : i64})
// CHECK-SAME: attributes {tp.entry = "function"}
// CHECK: %[[Y:.+]] = linalg.generic
// CHECK: %[[W0:.+]] = bufferization.materialize_in_destination %[[Y]] in %[[OUT0]]
// CHECK: %[[W1:.+]] = bufferization.materialize_in_destination %[[S]] in %[[OUT1]]
// CHECK: return %[[W0]], %[[W1]]

// Partitioned, each output is laid out as the value written into it: the
// split result leaves split, each rank writing its columns.
// PARTITIONED-LABEL: func.func @main(
// PARTITIONED-SAME: tensor<4x4xf32> {tp.global_shape = array<i64: 4, 8>, tp.name = "arg0"
// PARTITIONED-SAME: tensor<4x4xf32> {tp.global_shape = array<i64: 4, 8>, tp.name = "result0", tp.role = "output", tp.sharding = #tp.sharding<@mesh, {{\[\[}}], ["tp"]]>}
// PARTITIONED-SAME: tensor<f32> {tp.global_shape = array<i64>, tp.name = "result1", tp.role = "output", tp.sharding = #tp.sharding<@mesh, []>}
#id = affine_map<(d0, d1) -> (d0, d1)>
tp.mesh @mesh axes = ["tp" = 2]
func.func @main(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>}, %s: tensor<f32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.addf %in, %in : f32
    linalg.yield %d : f32
  } -> tensor<4x8xf32>
  return %y, %s : tensor<4x8xf32>, tensor<f32>
}

// -----

// expected-error @+1 {{tp-function-entry: the module defines no function '@main' to export}}
module {
  func.func @other(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{argument #0 of '@main' is 'tensor<4xi32>': a function entry exchanges f32 tensors of static shape}}
func.func @main(%ids: tensor<4xi32>) -> tensor<4xi32> {
  return %ids : tensor<4xi32>
}

// -----

// An input is its whole value on every rank, never a pending sum (which
// would count it once per rank).
tp.mesh @mesh axes = ["tp" = 2]
// expected-error @+1 {{argument #0 of '@main' is a partial sum over tp: a function entry's inputs hold their whole value}}
func.func @main(%x: tensor<4xf32> {tp.sharding = #tp.sharding<@mesh, [[]], partial = ["tp"]>}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{result #0 of '@main' is 'f32': a function entry exchanges f32 tensors of static shape}}
func.func @main(%x: tensor<4xf32>) -> f32 {
  %s = arith.constant 1.0 : f32
  return %s : f32
}
