// RUN: megatron-opt %s -split-input-file -tp-autodiff -verify-diagnostics | FileCheck %s

// Every collective has a VJP, its adjoint data movement: a sum over ranks
// gives each addend the cotangent, a local slice and a reduce-scatter
// assemble the ranks' chunks (all-gather), an all-gather keeps this rank's
// chunk (local slice).

// CHECK-LABEL: func.func @collectives(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x8xf32> {tp.name = "x"}
// CHECK: %[[A:.*]] = tp.all_gather %[[X]] over @m["tp"] dim = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK: %[[S:.*]] = tp.reduce_scatter sum %[[A]] over @m["tp"] dim = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: %[[L:.*]] = tp.local_slice %[[S]] over @m["tp"] dim = 0 : tensor<2x8xf32> -> tensor<1x8xf32>
// CHECK: %[[R:.*]] = tp.all_reduce sum %[[L]] over @m["tp"] : tensor<1x8xf32>
// CHECK: %[[DR:.*]] = tp.xent_grad %[[R]]
// CHECK: %[[DS:.*]] = tp.all_gather %[[DR]] over @m["tp"] dim = 0 {tp.phase = "backward"} : tensor<1x8xf32> -> tensor<2x8xf32>
// CHECK: %[[DA:.*]] = tp.all_gather %[[DS]] over @m["tp"] dim = 0 {tp.phase = "backward"} : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK: %[[DX:.*]] = tp.local_slice %[[DA]] over @m["tp"] dim = 0 {tp.phase = "backward"} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: return %{{.*}}, %[[DX]]
tp.mesh @m axes = ["tp" = 2]
func.func @collectives(%x: tensor<2x8xf32> {tp.name = "x"}, %t: tensor<1xi32>) -> tensor<f32> {
  %a = tp.all_gather %x over @m["tp"] dim = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  %s = tp.reduce_scatter sum %a over @m["tp"] dim = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %l = tp.local_slice %s over @m["tp"] dim = 0 : tensor<2x8xf32> -> tensor<1x8xf32>
  %r = tp.all_reduce sum %l over @m["tp"] : tensor<1x8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %r offset %c0 valid_vocab = 8 : tensor<1x8xf32> -> tensor<1xf32>
  %se, %tl = tp.xent_sum_exp %r, %max, %t offset %c0 valid_vocab = 8 : tensor<1x8xf32>, tensor<1xi32> -> tensor<1xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<1xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Sequence parallelism's gather into a split region: each rank's cotangent
// of the gathered value is partial, so the gradient is their sum's chunk,
// one reduce-scatter.

// CHECK-LABEL: func.func @sp_gather(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x8xf32> {tp.name = "x"}
// CHECK: %[[A:.*]] = tp.sp_gather %[[X]] over @m["tp"] dim = 0 : tensor<1x8xf32> -> tensor<2x8xf32>
// CHECK: %[[DA:.*]] = tp.xent_grad
// CHECK: %[[DX:.*]] = tp.reduce_scatter sum %[[DA]] over @m["tp"] dim = 0 {tp.phase = "backward"} : tensor<2x8xf32> -> tensor<1x8xf32>
// CHECK: return %{{.*}}, %[[DX]]
tp.mesh @m axes = ["tp" = 2]
func.func @sp_gather(%x: tensor<1x8xf32> {tp.name = "x"}, %t: tensor<2xi32>) -> tensor<f32> {
  %a = tp.sp_gather %x over @m["tp"] dim = 0 : tensor<1x8xf32> -> tensor<2x8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %a offset %c0 valid_vocab = 8 : tensor<2x8xf32> -> tensor<2xf32>
  %se, %tl = tp.xent_sum_exp %a, %max, %t offset %c0 valid_vocab = 8 : tensor<2x8xf32>, tensor<2xi32> -> tensor<2xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<2xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A maximum over ranks passes no gradient on.
tp.mesh @m axes = ["tp" = 2]
func.func @max(%x: tensor<1x8xf32> {tp.name = "x"}, %t: tensor<1xi32>) -> tensor<f32> {
  // expected-error @+1 {{'tp.all_reduce' op has no gradient rule for a max reduction}}
  %r = tp.all_reduce max %x over @m["tp"] : tensor<1x8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %r offset %c0 valid_vocab = 8 : tensor<1x8xf32> -> tensor<1xf32>
  %se, %tl = tp.xent_sum_exp %r, %max, %t offset %c0 valid_vocab = 8 : tensor<1x8xf32>, tensor<1xi32> -> tensor<1xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<1xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @scatter_max(%x: tensor<2x8xf32> {tp.name = "x"}, %t: tensor<1xi32>) -> tensor<f32> {
  // expected-error @+1 {{'tp.reduce_scatter' op has no gradient rule for a max reduction}}
  %r = tp.reduce_scatter max %x over @m["tp"] dim = 0 : tensor<2x8xf32> -> tensor<1x8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %r offset %c0 valid_vocab = 8 : tensor<1x8xf32> -> tensor<1xf32>
  %se, %tl = tp.xent_sum_exp %r, %max, %t offset %c0 valid_vocab = 8 : tensor<1x8xf32>, tensor<1xi32> -> tensor<1xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<1xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
