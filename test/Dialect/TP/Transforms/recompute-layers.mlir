// RUN: megatron-opt %s -split-input-file -tp-recompute-layers | FileCheck %s

// Each layer's backward reads copies of the forward values it needs, made
// just before its first backward op, from the layer's input; what only the
// forward pass reads (layer 0's output %a0, the next layer's input) is not
// copied, and the uses before a layer's backward (the head's gradient of
// the last output) keep the original.
// CHECK-LABEL: func.func @two_layers(
// CHECK-SAME:      %[[X:.*]]: tensor<4x16xf32>, %[[W0:.*]]: tensor<16x16xf32>, %[[W1:.*]]: tensor<16x16xf32>, %[[DY:.*]]: tensor<4x16xf32>)
// CHECK-NEXT:    %[[H0:.*]] = tp.matmul %[[X]], %[[W0]] :
// CHECK-NEXT:    %[[A0:.*]] = tp.gelu %[[H0]] :
// CHECK-NEXT:    %[[H1:.*]] = tp.matmul %[[A0]], %[[W1]] :
// CHECK-NEXT:    %[[A1:.*]] = tp.gelu %[[H1]] :
// CHECK-NEXT:    %[[HEAD:.*]] = tp.gelu_grad %[[A1]], %[[DY]] {tp.phase = "backward"}
// CHECK-NEXT:    %[[R1:.*]] = tp.matmul %[[A0]], %[[W1]] {tp.phase = "recompute"}
// CHECK-NEXT:    %[[D1:.*]] = tp.gelu_grad %[[R1]], %[[HEAD]] {tp.phase = "backward"}
// CHECK-NEXT:    %[[R0:.*]] = tp.matmul %[[X]], %[[W0]] {tp.phase = "recompute"}
// CHECK-NEXT:    %[[D0:.*]] = tp.gelu_grad %[[R0]], %[[D1]] {tp.phase = "backward"}
// CHECK-NEXT:    return %[[D0]]
func.func @two_layers(%x: tensor<4x16xf32>, %w0: tensor<16x16xf32>, %w1: tensor<16x16xf32>, %dy: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %h0 = tp.matmul %x, %w0 : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32> loc(#l0)
  %a0 = tp.gelu %h0 : tensor<4x16xf32> loc(#l0)
  %h1 = tp.matmul %a0, %w1 : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32> loc(#l1)
  %a1 = tp.gelu %h1 : tensor<4x16xf32> loc(#l1)
  %head = tp.gelu_grad %a1, %dy {tp.phase = "backward"} : tensor<4x16xf32>
  %d1 = tp.gelu_grad %h1, %head {tp.phase = "backward"} : tensor<4x16xf32> loc(#l1)
  %d0 = tp.gelu_grad %h0, %d1 {tp.phase = "backward"} : tensor<4x16xf32> loc(#l0)
  return %d0 : tensor<4x16xf32>
}
#l0 = loc(fused<#tp.layer<0>>["h.0"])
#l1 = loc(fused<#tp.layer<1>>["h.1"])

// -----

// A value the backward reads is recomputed with the chain of the layer's
// ops it comes from; a layer with no backward (and a kept forward entry)
// is left as it is.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME:      %[[X:.*]]: tensor<4x16xf32>, %[[DY:.*]]: tensor<4x16xf32>)
// CHECK:         tp.gelu_grad
// CHECK-NEXT:    %[[G:.*]] = tp.gelu %[[X]] {tp.phase = "recompute"}
// CHECK-NEXT:    %[[GG:.*]] = tp.gelu %[[G]] {tp.phase = "recompute"}
// CHECK-NEXT:    tp.gelu_grad %[[GG]], %{{.*}} {tp.phase = "backward"}
// CHECK-NOT:     "recompute"
// CHECK-LABEL: func.func @chain_forward(
// CHECK-NOT:     "recompute"
func.func @chain(%x: tensor<4x16xf32>, %dy: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %g = tp.gelu %x : tensor<4x16xf32> loc(#l0)
  %gg = tp.gelu %g : tensor<4x16xf32> loc(#l0)
  %out = tp.gelu %gg : tensor<4x16xf32> loc(#l0)
  %u = tp.gelu %out : tensor<4x16xf32> loc(#l1)
  %head = tp.gelu_grad %u, %dy {tp.phase = "backward"} : tensor<4x16xf32>
  %d0 = tp.gelu_grad %gg, %head {tp.phase = "backward"} : tensor<4x16xf32> loc(#l0)
  return %d0 : tensor<4x16xf32>
}
func.func @chain_forward(%x: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {tp.entry = "forward"} {
  %g = tp.gelu %x : tensor<4x16xf32> loc(#l0)
  %d = tp.gelu_grad %g, %x {tp.phase = "backward"} : tensor<4x16xf32> loc(#l0)
  return %d : tensor<4x16xf32>
}
#l0 = loc(fused<#tp.layer<0>>["h.0"])
#l1 = loc(fused<#tp.layer<1>>["h.1"])
