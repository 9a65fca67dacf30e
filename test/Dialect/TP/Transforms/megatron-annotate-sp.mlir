// RUN: megatron-opt %s -split-input-file -tp-megatron-annotate="tp=2 sequence-parallel=true" -verify-diagnostics | FileCheck %s

// Sequence parallelism: the residual stream (the [batch, sequence, width]
// input of each norm) has its sequence split over "tp"; the weights are
// split as without it. Propagation finds the rest (sequence-parallel.mlir).

// CHECK-LABEL: func.func @block(
// CHECK: %[[X:.*]] = tp.add %{{.*}}, %{{.*}} {tp.sharding = #tp.sharding<@mesh, {{\[\[}}], ["tp"], []]>}
// CHECK: tp.layer_norm %[[X]]
func.func @block(%a: tensor<2x8x16xf32>, %b: tensor<2x8x16xf32>, %g: tensor<16xf32>, %beta: tensor<16xf32>) -> tensor<2x8x16xf32> {
  %x = tp.add %a, %b : tensor<2x8x16xf32>
  %y = tp.layer_norm %x, %g, %beta : tensor<2x8x16xf32>, tensor<16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

func.func @indivisible(%x: tensor<2x7x16xf32>, %g: tensor<16xf32>) -> tensor<2x7x16xf32> {
  // expected-error @+1 {{sequence parallelism splits the sequence of 7 positions over tp=2, which does not divide it}}
  %y = tp.rms_norm %x, %g : tensor<2x7x16xf32>, tensor<16xf32>
  return %y : tensor<2x7x16xf32>
}

// -----

// expected-error @+1 {{sequence parallelism splits a training step's sequence; a generation step decodes one position at a time}}
func.func @decode(%x: tensor<2x1x16xf32>, %g: tensor<16xf32>) -> tensor<2x1x16xf32> attributes {tp.entry = "decode"} {
  %y = tp.rms_norm %x, %g : tensor<2x1x16xf32>, tensor<16xf32>
  return %y : tensor<2x1x16xf32>
}
