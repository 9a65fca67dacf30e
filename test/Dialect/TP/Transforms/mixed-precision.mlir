// RUN: megatron-opt %s -split-input-file -tp-mixed-precision | FileCheck %s
// RUN: megatron-opt %s -split-input-file -tp-mixed-precision -mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// A weight is rounded once; its forward and backward GEMMs share the copy.
// Activations and their gradients are bf16, the weight's gradient fp32.

// CHECK-LABEL: func.func @gemm_and_gradient(
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x16xf32> {tp.name = "w"}, %[[DY:.*]]: tensor<4x16xf32>)
// CHECK-SAME: -> (tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16xf32>)
// CHECK: %[[XB:.*]] = tp.convert %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[WB:.*]] = tp.convert %[[W]] : tensor<8x16xf32> -> tensor<8x16xbf16>
// CHECK: %[[DYB:.*]] = tp.convert %[[DY]] : tensor<4x16xf32> -> tensor<4x16xbf16>
// CHECK: %[[Y:.*]] = tp.matmul %[[XB]], %[[WB]] : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
// CHECK: %[[YF:.*]] = tp.convert %[[Y]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK: %[[DX:.*]] = tp.matmul %[[DYB]], %[[WB]] {transpose_rhs} : tensor<4x16xbf16>, tensor<8x16xbf16> -> tensor<4x8xbf16>
// CHECK: %[[DXF:.*]] = tp.convert %[[DX]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: %[[DW:.*]] = tp.weight_grad %[[XB]], %[[DYB]] : tensor<4x8xbf16>, tensor<4x16xbf16> -> tensor<8x16xf32>
// CHECK-NOT: tp.convert
// CHECK: return %[[YF]], %[[DXF]], %[[DW]] :

// A parameter's copy is named after it (so is the kernel that makes it).
// LOC-LABEL: func.func @gemm_and_gradient(
// LOC: tp.convert %arg1 : {{.*}} loc(#[[WLOC:loc[0-9]+]])
// LOC: #[[WLOC]] = loc("w"(
func.func @gemm_and_gradient(%x: tensor<4x8xf32>, %w: tensor<8x16xf32> {tp.name = "w"},
                             %dy: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) {
  %y = tp.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %dx = tp.matmul %dy, %w {transpose_rhs} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  %dw = tp.weight_grad %x, %dy : tensor<4x8xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
  return %y, %dx, %dw : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16xf32>
}

// -----

// Layer norm: bf16 in and out, fp32 parameter gradients. Sums and
// collectives follow their operands: bf16 activations, fp32 gradients.

tp.mesh @mesh axes = ["tp" = 2]
// CHECK-LABEL: func.func @norm_and_sums(
// CHECK: %[[N:.*]] = tp.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8xbf16>
// CHECK: %[[G:.*]] = tp.g %[[N]] over @mesh["tp"] : tensor<4x8xbf16>
// CHECK: %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = tp.layer_norm_grad %{{.*}}, %{{.*}}, %[[G]] {{.*}} : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<8xf32>
// CHECK: %[[S:.*]] = tp.add %[[DX]], %[[G]] : tensor<4x8xbf16>
// CHECK: %[[P:.*]] = tp.add %[[DW]], %[[DB]] : tensor<8xf32>
// CHECK: %[[R:.*]] = tp.all_reduce sum %[[P]] over @mesh["tp"] : tensor<8xf32>
// CHECK: %[[B:.*]] = tp.sum_to %[[S]] : tensor<4x8xbf16> -> tensor<8xf32>
func.func @norm_and_sums(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %n = tp.layer_norm %x, %w, %b : tensor<4x8xf32>, tensor<8xf32>
  %g = tp.g %n over @mesh["tp"] : tensor<4x8xf32>
  %dx, %dw, %db = tp.layer_norm_grad %x, %w, %g {epsilon = 1.0e-5 : f32} : tensor<4x8xf32>, tensor<8xf32> -> tensor<8xf32>
  %s = tp.add %dx, %g : tensor<4x8xf32>
  %p = tp.add %dw, %db : tensor<8xf32>
  %r = tp.all_reduce sum %p over @mesh["tp"] : tensor<8xf32>
  %bias = tp.sum_to %s : tensor<4x8xf32> -> tensor<8xf32>
  return %s, %r, %bias : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// RMS norm likewise: bf16 in and out, an fp32 weight gradient.

// CHECK-LABEL: func.func @rms_norm(
// CHECK: %[[N:.*]] = tp.rms_norm %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8xbf16>
// CHECK: %[[DX:.*]], %[[DW:.*]] = tp.rms_norm_grad %{{.*}}, %{{.*}}, %[[N]] {{.*}} : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<8xf32>
func.func @rms_norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<8xf32>) {
  %n = tp.rms_norm %x, %w : tensor<4x8xf32>, tensor<8xf32>
  %dx, %dw = tp.rms_norm_grad %x, %w, %n {epsilon = 1.0e-5 : f32} : tensor<4x8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %dx, %dw : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// The logits are bf16; the cross-entropy's statistics and loss stay fp32,
// and its gradient of the logits is bf16 again.

// CHECK-LABEL: func.func @cross_entropy(
// CHECK: %[[L:.*]] = tp.convert %{{.*}} : tensor<2x16xf32> -> tensor<2x16xbf16>
// CHECK: %[[MAX:.*]] = tp.xent_max %[[L]] offset %{{.*}} valid_vocab = 16 : tensor<2x16xbf16> -> tensor<2xf32>
// CHECK: %[[SUM:.*]], %[[T:.*]] = tp.xent_sum_exp %[[L]], %[[MAX]], %{{.*}} offset {{.*}} : tensor<2x16xbf16>, tensor<2xi32> -> tensor<2xf32>
// CHECK: %[[LOSS:.*]] = tp.xent_loss %[[SUM]], %[[MAX]], %[[T]] : tensor<2xf32> -> tensor<f32>
// CHECK: tp.xent_grad %[[L]], %[[MAX]], %[[SUM]], {{.*}} : tensor<2x16xbf16>, tensor<2xf32>, tensor<2xi32>, tensor<f32>
func.func @cross_entropy(%logits: tensor<2x16xf32>, %targets: tensor<2xi32>, %one: tensor<f32>)
    -> (tensor<f32>, tensor<2x16xf32>) {
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %logits offset %c0 valid_vocab = 16 : tensor<2x16xf32> -> tensor<2xf32>
  %sum, %t = tp.xent_sum_exp %logits, %max, %targets offset %c0 valid_vocab = 16 : tensor<2x16xf32>, tensor<2xi32> -> tensor<2xf32>
  %loss = tp.xent_loss %sum, %max, %t : tensor<2xf32> -> tensor<f32>
  %grad = tp.xent_grad %logits, %max, %sum, %targets, %one offset %c0 valid_vocab = 16 : tensor<2x16xf32>, tensor<2xf32>, tensor<2xi32>, tensor<f32>
  return %loss, %grad : tensor<f32>, tensor<2x16xf32>
}

// -----

// AdamW updates the fp32 master from its fp32 gradient: no conversion.

// CHECK-LABEL: func.func @optimizer(
// CHECK-NOT: tp.convert
// CHECK: tp.adamw %{{.*}} : tensor<8xf32>, tensor<8xf32>
func.func @optimizer(%p: tensor<8xf32>, %g: tensor<8xf32>, %m: tensor<8xf32>,
                     %v: tensor<8xf32>, %h: tensor<8xf32>, %s: f32, %ok: i1)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %np, %nm, %nv = tp.adamw %p, %g, %m, %v, %h, %s if %ok : tensor<8xf32>, tensor<8xf32>
  return %np, %nm, %nv : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A conversion already in the program keeps the type it states; its operand
// arrives as the pass left it (here the bf16 product), with no second copy.

// CHECK-LABEL: func.func @stated_convert(
// CHECK: %[[Y:.*]] = tp.matmul {{.*}} -> tensor<4x16xbf16>
// CHECK-NEXT: %[[C:.*]] = tp.convert %[[Y]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x16xf32>
func.func @stated_convert(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = tp.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %c = tp.convert %y : tensor<4x16xf32> -> tensor<4x16xf32>
  return %c : tensor<4x16xf32>
}
