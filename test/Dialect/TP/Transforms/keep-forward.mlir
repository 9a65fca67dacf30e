// RUN: megatron-opt %s -tp-keep-forward -tp-autodiff | FileCheck %s
// RUN: megatron-opt %s -tp-keep-forward -tp-keep-forward -verify-diagnostics -o /dev/null

// The step becomes the training step; its copy, the forward entry, keeps the
// forward pass alone (tp-autodiff leaves it).
// CHECK-LABEL: func.func @step(
// CHECK-SAME:      -> (tensor<f32>, tensor<16x8xf32> {tp.grad_of = "w"}) attributes {tp.entry = "train_step"}
// CHECK:         tp.xent_grad
// CHECK-LABEL: func.func @step_forward(
// CHECK-SAME:      -> tensor<f32> attributes {tp.entry = "forward"}
// CHECK:         %[[LOSS:.*]] = tp.xent_loss
// CHECK-NEXT:    return %[[LOSS]] : tensor<f32>

// expected-error @+1 {{tp-keep-forward: '@step' is already an entry (tp.entry)}}
func.func @step(%x: tensor<4x16xf32>, %w: tensor<16x8xf32> {tp.name = "w"},
                %t: tensor<4xi32> {tp.role = "targets"}) -> tensor<f32> {
  %y = tp.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %y offset %c0 valid_vocab = 8 : tensor<4x8xf32> -> tensor<4xf32>
  %se, %tl = tp.xent_sum_exp %y, %max, %t offset %c0 valid_vocab = 8 : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
