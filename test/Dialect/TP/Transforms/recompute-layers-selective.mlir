// RUN: megatron-opt %s -tp-recompute-layers=selective=true | FileCheck %s

// Selectively, the backward pass recomputes the norm and the activation it
// reads, from the GEMM result and the layer input the step keeps; the GEMM
// itself is not run again.
// CHECK-LABEL: func.func @layer(
// CHECK-SAME:      %[[X:.*]]: tensor<4x16xf32>, %[[W:.*]]: tensor<16x16xf32>, %[[G:.*]]: tensor<16xf32>, %[[B:.*]]: tensor<16xf32>, %[[DY:.*]]: tensor<4x16xf32>)
// CHECK-NEXT:    %[[N:.*]] = tp.layer_norm %[[X]], %[[G]], %[[B]] :
// CHECK-NEXT:    %[[H:.*]] = tp.matmul %[[N]], %[[W]] :
// CHECK-NEXT:    %[[A:.*]] = tp.gelu %[[H]] :
// CHECK-NEXT:    %[[RN:.*]] = tp.layer_norm %[[X]], %[[G]], %[[B]] {tp.phase = "recompute"}
// CHECK-NEXT:    %[[RA:.*]] = tp.gelu %[[H]] {tp.phase = "recompute"}
// CHECK-NEXT:    %[[DA:.*]] = tp.gelu_grad %[[RA]], %[[DY]] {tp.phase = "backward"}
// CHECK-NEXT:    %[[DH:.*]] = tp.gelu_grad %[[H]], %[[DA]] {tp.phase = "backward"}
// CHECK-NEXT:    tp.weight_grad %[[RN]], %[[DH]] {tp.phase = "backward"}
// CHECK-NOT:     tp.matmul
func.func @layer(%x: tensor<4x16xf32>, %w: tensor<16x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>, %dy: tensor<4x16xf32>) -> tensor<16x16xf32> {
  %n = tp.layer_norm %x, %g, %b : tensor<4x16xf32>, tensor<16xf32> loc(#l0)
  %h = tp.matmul %n, %w : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32> loc(#l0)
  %a = tp.gelu %h : tensor<4x16xf32> loc(#l0)
  %da = tp.gelu_grad %a, %dy {tp.phase = "backward"} : tensor<4x16xf32> loc(#l0)
  %dh = tp.gelu_grad %h, %da {tp.phase = "backward"} : tensor<4x16xf32> loc(#l0)
  %dw = tp.weight_grad %n, %dh {tp.phase = "backward"} : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<16x16xf32> loc(#l0)
  return %dw : tensor<16x16xf32>
}
#l0 = loc(fused<#tp.layer<0>>["h.0"])
