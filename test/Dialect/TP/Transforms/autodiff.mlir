// RUN: megatron-opt %s -split-input-file -tp-autodiff -verify-diagnostics | FileCheck %s

// Megatron's MLP on one rank of two: the gradient of g is the identity, the
// gradient of f an all-reduce; the weights' gradients are local.

// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x16xf32> {tp.name = "x"}
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<16x32xf32> {tp.name = "a"}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<32x16xf32> {tp.name = "b"}
// CHECK-SAME: -> (tensor<f32>, tensor<8x16xf32> {tp.grad_of = "x"}, tensor<16x32xf32> {tp.grad_of = "a"}, tensor<32x16xf32> {tp.grad_of = "b"})
// CHECK: %[[F:.*]] = tp.f %[[X]]
// CHECK: %[[H:.*]] = tp.matmul %[[F]], %[[A]]
// CHECK: %[[ACT:.*]] = tp.gelu %[[H]]
// CHECK: %[[Y:.*]] = tp.matmul %[[ACT]], %[[B]]
// CHECK: %[[G:.*]] = tp.g %[[Y]]
// CHECK: %[[LOSS:.*]] = tp.xent_loss
// CHECK: %[[SEED:.*]] = arith.constant {tp.phase = "backward"} dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DG:.*]] = tp.xent_grad %[[G]], {{.*}}, %[[SEED]] {{.*}}{tp.phase = "backward"}
// CHECK: %[[DACT:.*]] = tp.matmul %[[DG]], %[[B]] {tp.phase = "backward", transpose_rhs}
// CHECK: %[[DB:.*]] = tp.weight_grad %[[ACT]], %[[DG]] {tp.phase = "backward"}
// CHECK: %[[DH:.*]] = tp.gelu_grad %[[H]], %[[DACT]] {tp.phase = "backward"}
// CHECK: %[[DF:.*]] = tp.matmul %[[DH]], %[[A]] {tp.phase = "backward", transpose_rhs}
// CHECK: %[[DA:.*]] = tp.weight_grad %[[F]], %[[DH]] {tp.phase = "backward"}
// CHECK: %[[DX:.*]] = tp.all_reduce sum %[[DF]] over @m["tp"] {tp.phase = "backward"}
// CHECK: return %[[LOSS]], %[[DX]], %[[DA]], %[[DB]]
tp.mesh @m axes = ["tp" = 2]
func.func @mlp(%x: tensor<8x16xf32> {tp.name = "x"}, %a: tensor<16x32xf32> {tp.name = "a"},
               %b: tensor<32x16xf32> {tp.name = "b"}, %t: tensor<8xi32>) -> tensor<f32> {
  %f = tp.f %x over @m["tp"] : tensor<8x16xf32>
  %h = tp.matmul %f, %a : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %act = tp.gelu %h : tensor<8x32xf32>
  %y = tp.matmul %act, %b : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
  %g = tp.g %y over @m["tp"] : tensor<8x16xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %g offset %c0 valid_vocab = 16 : tensor<8x16xf32> -> tensor<8xf32>
  %se, %tl = tp.xent_sum_exp %g, %max, %t offset %c0 valid_vocab = 16 : tensor<8x16xf32>, tensor<8xi32> -> tensor<8xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<8xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A value used twice gets the sum of its gradients; the bias's gradient
// sums over the rows it was broadcast to.

// CHECK-LABEL: func.func @residual(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x8xf32> {tp.name = "x"}
// CHECK: %[[DX:.*]] = tp.add %{{.*}}, %{{.*}} {tp.phase = "backward"}
// CHECK: %[[DBIAS:.*]] = tp.sum_to %{{.*}} {tp.phase = "backward"} : tensor<4x8xf32> -> tensor<8xf32>
// CHECK: return %{{.*}}, %[[DX]], %[[DBIAS]]
func.func @residual(%x: tensor<4x8xf32> {tp.name = "x"}, %bias: tensor<8xf32> {tp.name = "bias"}, %t: tensor<4xi32>) -> tensor<f32> {
  %b = tp.bias_add %x, %bias : tensor<4x8xf32>, tensor<8xf32>
  %r = tp.add %x, %b : tensor<4x8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %r offset %c0 valid_vocab = 8 : tensor<4x8xf32> -> tensor<4xf32>
  %se, %tl = tp.xent_sum_exp %r, %max, %t offset %c0 valid_vocab = 8 : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// An RMS norm's gradient: one tp.rms_norm_grad with the forward's epsilon
// gives the input's and the weight's.

// CHECK-LABEL: func.func @rms_norm(
// CHECK: %[[DX:.*]], %[[DW:.*]] = tp.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32, tp.phase = "backward"} : tensor<4x8xf32>, tensor<8xf32> -> tensor<8xf32>
// CHECK: return %{{.*}}, %[[DX]], %[[DW]]
func.func @rms_norm(%x: tensor<4x8xf32> {tp.name = "x"}, %w: tensor<8xf32> {tp.name = "w"}, %t: tensor<4xi32>) -> tensor<f32> {
  %n = tp.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<4x8xf32>, tensor<8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %n offset %c0 valid_vocab = 8 : tensor<4x8xf32> -> tensor<4xf32>
  %se, %tl = tp.xent_sum_exp %n, %max, %t offset %c0 valid_vocab = 8 : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-note @+1 {{@no_rule is not partitioned: tp-autodiff differentiates the per-rank program tp-partition makes}}
func.func @no_rule(%x: tensor<4x8xf32> {tp.name = "x"}, %t: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'tp.reshard' op has no gradient rule (VJPOpInterface)}}
  %s = tp.reshard %x : tensor<4x8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %s offset %c0 valid_vocab = 8 : tensor<4x8xf32> -> tensor<4xf32>
  %se, %tl = tp.xent_sum_exp %s, %max, %t offset %c0 valid_vocab = 8 : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{tp-autodiff needs a function returning one scalar loss}}
func.func @not_a_loss(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %x : tensor<4x8xf32>
}

// -----

func.func @transpose_lhs(%x: tensor<8x4xf32> {tp.name = "x"}, %w: tensor<8x16xf32> {tp.name = "w"}, %t: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'tp.matmul' op has no gradient rule with transpose_lhs or a batched rhs; the rule covers products with [K, N] weights}}
  %h = tp.matmul %x, %w {transpose_lhs} : tensor<8x4xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %h offset %c0 valid_vocab = 16 : tensor<4x16xf32> -> tensor<4xf32>
  %se, %tl = tp.xent_sum_exp %h, %max, %t offset %c0 valid_vocab = 16 : tensor<4x16xf32>, tensor<4xi32> -> tensor<4xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @batched_rhs(%x: tensor<2x4x8xf32> {tp.name = "x"}, %w: tensor<2x8x16xf32> {tp.name = "w"}, %t: tensor<2x4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'tp.matmul' op has no gradient rule with transpose_lhs or a batched rhs; the rule covers products with [K, N] weights}}
  %h = tp.matmul %x, %w : tensor<2x4x8xf32>, tensor<2x8x16xf32> -> tensor<2x4x16xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %h offset %c0 valid_vocab = 16 : tensor<2x4x16xf32> -> tensor<2x4xf32>
  %se, %tl = tp.xent_sum_exp %h, %max, %t offset %c0 valid_vocab = 16 : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<2x4xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<2x4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The loss's gradient rule reads the logits off the tp.xent_sum_exp (through
// an all-reduce) that produced its sum of exponentials.

func.func @loss_without_sum_exp(%se: tensor<4xf32> {tp.name = "se"}, %max: tensor<4xf32>, %tl: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'tp.xent_loss' op has no gradient rule unless its sum of exponentials comes from tp.xent_sum_exp}}
  %loss = tp.xent_loss %se, %max, %tl : tensor<4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Softmax's gradient uses its output: y * (dy - sum(dy * y)).
// CHECK-LABEL: func.func @softmax(
// CHECK: %[[Y:.*]] = tp.softmax %{{.*}} dim = 1
// CHECK: tp.softmax_grad %[[Y]], %{{.*}} dim = 1 {tp.phase = "backward"}
func.func @softmax(%x: tensor<4x8xf32> {tp.name = "x"}, %t: tensor<4xi32>) -> tensor<f32> {
  %y = tp.softmax %x dim = 1 : tensor<4x8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %y offset %c0 valid_vocab = 8 : tensor<4x8xf32> -> tensor<4xf32>
  %se, %tl = tp.xent_sum_exp %y, %max, %t offset %c0 valid_vocab = 8 : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
