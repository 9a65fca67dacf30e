// RUN: megatron-opt %s -split-input-file -tp-fuse-residual-norm -verify-diagnostics | FileCheck %s

// The residual add of a bias-added branch and the norm of its sum become
// one op at the add, which keeps the add's phase; the sum stays in use.
// CHECK-LABEL: func.func @residual(
// CHECK-SAME:      %[[X:.*]]: tensor<2x4x8xf32>, %[[D:.*]]: tensor<2x4x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[W:.*]]: tensor<8xf32>, %[[NB:.*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[SUM:.*]], %[[H:.*]] = tp.residual_layer_norm %[[X]], %[[D]], %[[B]], %[[W]], %[[NB]] {epsilon = 9.99999997E-7 : f32, tp.phase = "backward"}
// CHECK-NEXT:    return %[[SUM]], %[[H]]
func.func @residual(%x: tensor<2x4x8xf32>, %d: tensor<2x4x8xf32>, %b: tensor<8xf32>,
                    %w: tensor<8xf32>, %nb: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %y = tp.bias_add %d, %b : tensor<2x4x8xf32>, tensor<8xf32>
  %sum = tp.add %y, %x {tp.phase = "backward"} : tensor<2x4x8xf32>
  %h = tp.layer_norm %sum, %w, %nb {epsilon = 1.0e-6 : f32} : tensor<2x4x8xf32>, tensor<8xf32>
  return %sum, %h : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Without biases (Llama): an RMS norm of a plain residual add.
// CHECK-LABEL: func.func @residual_rms(
// CHECK-SAME:      %[[X:.*]]: tensor<2x4x8xf32>, %[[D:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[SUM:.*]], %[[H:.*]] = tp.residual_rms_norm %[[X]], %[[D]], %[[W]] {epsilon = 9.99999997E-7 : f32, tp.phase = "backward"}
// CHECK-NEXT:    return %[[SUM]], %[[H]]
func.func @residual_rms(%x: tensor<2x4x8xf32>, %d: tensor<2x4x8xf32>,
                        %w: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %sum = tp.add %x, %d {tp.phase = "backward"} : tensor<2x4x8xf32>
  %h = tp.rms_norm %sum, %w {epsilon = 1.0e-6 : f32} : tensor<2x4x8xf32>, tensor<8xf32>
  return %sum, %h : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// An RMS norm weight computed after the add, or a norm of something other
// than an add: nothing fuses.
// CHECK-LABEL: func.func @unfused_rms(
// CHECK-NOT:     tp.residual_rms_norm
// CHECK:         return
func.func @unfused_rms(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %sum = tp.add %x, %x : tensor<2x4x8xf32>
  %w2 = tp.add %w, %w : tensor<8xf32>
  %h = tp.rms_norm %sum, %w2 : tensor<2x4x8xf32>, tensor<8xf32>
  %h2 = tp.rms_norm %x, %w : tensor<2x4x8xf32>, tensor<8xf32>
  return %h, %h2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// A branch whose bias add is read elsewhere too, a bias over more than the
// last dimension, or a norm weight computed after the add: nothing fuses.
// CHECK-LABEL: func.func @unfused(
// CHECK-NOT:     tp.residual_layer_norm
// CHECK:         return
func.func @unfused(%x: tensor<2x4x8xf32>, %d: tensor<2x4x8xf32>, %b: tensor<8xf32>,
                   %b2: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %y = tp.bias_add %d, %b : tensor<2x4x8xf32>, tensor<8xf32>
  %sum = tp.add %x, %y : tensor<2x4x8xf32>
  %h = tp.layer_norm %sum, %w, %w : tensor<2x4x8xf32>, tensor<8xf32>
  %y2 = tp.bias_add %d, %b2 : tensor<2x4x8xf32>, tensor<4x8xf32>
  %sum2 = tp.add %x, %y2 : tensor<2x4x8xf32>
  %h2 = tp.layer_norm %sum2, %w, %w : tensor<2x4x8xf32>, tensor<8xf32>
  %y3 = tp.bias_add %d, %b : tensor<2x4x8xf32>, tensor<8xf32>
  %sum3 = tp.add %x, %y3 : tensor<2x4x8xf32>
  %w3 = tp.add %w, %w : tensor<8xf32>
  %h3 = tp.layer_norm %sum3, %w3, %w : tensor<2x4x8xf32>, tensor<8xf32>
  return %y, %h2, %h3 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// The pass takes the per-rank program, not its lowering.
func.func @lowered(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.load' is not part of a program tp-fuse-residual-norm takes}}
  %v = memref.load %x[%c0] : memref<4xf32>
  return
}
