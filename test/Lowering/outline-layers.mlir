// RUN: megatron-opt %s -split-input-file -tp-outline-layers -verify-diagnostics | FileCheck %s

// Two layers of one body become two calls of one function. Its arguments
// are what a layer reads from outside, in first-read order; its results are
// what is read after it: the layer's output and the activation the backward
// op saved (here %h0, read by the tp.gelu_grad after both layers).
// CHECK-LABEL: func.func private @two_layers_forward_layer0(
// CHECK-SAME:      %[[X:.*]]: tensor<4x16xf32>, %[[W:.*]]: tensor<16x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
// CHECK-NEXT:    %[[H:.*]] = tp.matmul %[[X]], %[[W]]
// CHECK-NEXT:    %[[A:.*]] = tp.gelu %[[H]]
// CHECK-NEXT:    return %[[H]], %[[A]]
// CHECK-LABEL: func.func @two_layers(
// CHECK-SAME:      %[[X0:.*]]: tensor<4x16xf32>, %[[W0:.*]]: tensor<16x16xf32>, %[[W1:.*]]: tensor<16x16xf32>)
// CHECK-NEXT:    %[[L0:.*]]:2 = call @two_layers_forward_layer0(%[[X0]], %[[W0]])
// CHECK-NEXT:    %[[L1:.*]]:2 = call @two_layers_forward_layer0(%[[L0]]#1, %[[W1]])
// CHECK-NEXT:    %[[G:.*]] = tp.gelu_grad %[[L0]]#0, %[[L1]]#1
// CHECK-NEXT:    return %[[G]]
func.func @two_layers(%x: tensor<4x16xf32>, %w0: tensor<16x16xf32>, %w1: tensor<16x16xf32>) -> tensor<4x16xf32> {
  %h0 = tp.matmul %x, %w0 : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32> loc(#l0)
  %a0 = tp.gelu %h0 : tensor<4x16xf32> loc(#l0)
  %h1 = tp.matmul %a0, %w1 : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32> loc(#l1)
  %a1 = tp.gelu %h1 : tensor<4x16xf32> loc(#l1)
  %g = tp.gelu_grad %h0, %a1 : tensor<4x16xf32>
  return %g : tensor<4x16xf32>
}
#l0 = loc(fused<#tp.layer<0>>["h.0"])
#l1 = loc(fused<#tp.layer<1>>["h.1"])

// -----

// Bodies are grouped by phase and named by their ordinal in it; the
// backward pass reads the forward's saved activation through the call.
// CHECK-LABEL: func.func private @phases_forward_layer0(
// CHECK-LABEL: func.func private @phases_backward_layer0(
// CHECK-SAME:      %{{.*}}: tensor<4x16xf32>, %{{.*}}: tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    tp.gelu_grad {{.*}} {tp.phase = "backward"}
// CHECK-LABEL: func.func @phases(
// CHECK:         %[[F0:.*]] = call @phases_forward_layer0(
// CHECK:         %[[F1:.*]] = call @phases_forward_layer0(%[[F0]])
// CHECK:         %[[B1:.*]] = call @phases_backward_layer0(%[[F0]], %{{.*}})
// CHECK:         call @phases_backward_layer0(%{{.*}}, %[[B1]])
func.func @phases(%x: tensor<4x16xf32>, %dy: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %a0 = tp.gelu %x : tensor<4x16xf32> loc(#l0)
  %a1 = tp.gelu %a0 : tensor<4x16xf32> loc(#l1)
  %d1 = tp.gelu_grad %a0, %dy {tp.phase = "backward"} : tensor<4x16xf32> loc(#l1)
  %d0 = tp.gelu_grad %x, %d1 {tp.phase = "backward"} : tensor<4x16xf32> loc(#l0)
  return %d0 : tensor<4x16xf32>
}
#l0 = loc(fused<#tp.layer<0>>["h.0"])
#l1 = loc(fused<#tp.layer<1>>["h.1"])

// -----

// Runs that read their inputs in another pattern (one value twice, or two
// values) are not the same body, and a body that occurs once stays in
// place: nothing is outlined.
// CHECK-LABEL: func.func @unlike(
// CHECK-NOT:     call
// CHECK:         tp.add %[[X:.*]], %[[X]]
// CHECK:         tp.add
// CHECK-NOT:     call
// CHECK:         return
func.func @unlike(%x: tensor<4x16xf32>, %y: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %a0 = tp.add %x, %x : tensor<4x16xf32> loc(#l0)
  %a1 = tp.add %a0, %y : tensor<4x16xf32> loc(#l1)
  return %a1 : tensor<4x16xf32>
}
#l0 = loc(fused<#tp.layer<0>>["h.0"])
#l1 = loc(fused<#tp.layer<1>>["h.1"])

// -----

// The pass takes the per-rank program, not its lowering.
func.func @lowered(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.load' is not part of a program tp-outline-layers takes}}
  %v = memref.load %x[%c0] : memref<4xf32>
  return
}
