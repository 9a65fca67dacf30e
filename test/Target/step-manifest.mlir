// RUN: megatron-opt %s -split-input-file -tp-step-manifest -verify-diagnostics -o /dev/null
// RUN: gpt2-mlir --preset=tiny --layers=1 | megatron-compile - --tp=2 --train --emit=partitioned -o - | megatron-opt --tp-step-manifest | FileCheck %s
// RUN: not megatron-opt %s -split-input-file -tp-step-manifest=target=tpu -o /dev/null 2>&1 | FileCheck %s --check-prefix=TARGET

// TARGET: error: tp-step-manifest: unknown target 'tpu'; use cpu, cuda or cuda-on-host

// The manifest and the entries travel on the module to the library: the
// forward entry takes the step's arguments at the manifest's positions.
// CHECK-LABEL: module attributes {tp.step = {
// CHECK-SAME: entries = [{arguments = array<i32: 0, 1, {{[0-9, ]+}}, 17>, function = "gpt2_forward", kind = "forward"}, {arguments = array<i32: 0, 1, {{[0-9, ]+}}, 50>, function = "gpt2", kind = "train_step"}]
// CHECK-SAME: manifest = "{{.*}}\22entries\22:[\22forward\22,\22train_step\22]
// CHECK-SAME: target = "cpu"}}

// A manifest megatron-run would refuse (here f32 tokens, and a parameter
// without AdamW state) is refused where it is made, in megatron-run's words.
// expected-error @+1 {{megatron-run would refuse this step's manifest: invalid manifest: args[0] "x": dtype "f32" (tokens must be i32)}}
func.func @step(%x: tensor<4x16xf32> {tp.name = "x", tp.role = "tokens"}, %w: tensor<16x8xf32> {tp.name = "w"},
                %t: tensor<4xi32> {tp.name = "t", tp.role = "targets"}, %h: tensor<8xf32> {tp.name = "hp", tp.role = "hyperparameters"}) -> tensor<f32>
    attributes {tp.entry = "train_step"} {
  %y = tp.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %y offset %c0 valid_vocab = 8 : tensor<4x8xf32> -> tensor<4xf32>
  %se, %tl = tp.xent_sum_exp %y, %max, %t offset %c0 valid_vocab = 8 : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @step_forward(%x: tensor<4x16xf32> {tp.name = "x", tp.role = "tokens"}, %w: tensor<16x8xf32> {tp.name = "w"},
                        %t: tensor<4xi32> {tp.name = "t", tp.role = "targets"}) -> tensor<f32>
    attributes {tp.entry = "forward"} {
  %y = tp.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %y offset %c0 valid_vocab = 8 : tensor<4x8xf32> -> tensor<4xf32>
  %se, %tl = tp.xent_sum_exp %y, %max, %t offset %c0 valid_vocab = 8 : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{tp-step-manifest: the module defines 2 functions and marks none as an entry (tp.entry): the step library exports one forward entry}}
module {
  func.func @a() {
    return
  }
  func.func @b() {
    return
  }
}

// -----

// expected-error @+1 {{tp-step-manifest: a step library exports one forward entry and at most one train step; the module marks 2 and 0}}
module {
  func.func @a() attributes {tp.entry = "forward"} {
    return
  }
  func.func @b() attributes {tp.entry = "forward"} {
    return
  }
}

// -----

// A framework's function is its library's only entry.
// expected-error @+1 {{tp-step-manifest: a function's step library exports that function alone; the module marks 1 functions and 1 model entries}}
module {
  func.func @main() attributes {tp.entry = "function"} {
    return
  }
  func.func @b() attributes {tp.entry = "forward"} {
    return
  }
}

// -----

// The entries' arguments are matched by name: one name has one type.
func.func @step(%x: tensor<4x16xf32> {tp.name = "x", tp.role = "tokens"}, %w: tensor<16x8xf32> {tp.name = "w"},
                %t: tensor<4xi32> {tp.name = "t", tp.role = "targets"}) -> tensor<f32>
    attributes {tp.entry = "train_step"} {
  %y = tp.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %c0 = arith.constant 0 : index
  %max = tp.xent_max %y offset %c0 valid_vocab = 8 : tensor<4x8xf32> -> tensor<4xf32>
  %se, %tl = tp.xent_sum_exp %y, %max, %t offset %c0 valid_vocab = 8 : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
  %loss = tp.xent_loss %se, %max, %tl : tensor<4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{argument #0 (x) has type 'tensor<4x8xf32>' but another entry's argument of that name 'tensor<4x16xf32>'}}
func.func @step_forward(%x: tensor<4x8xf32> {tp.name = "x"}) -> tensor<f32>
    attributes {tp.entry = "forward"} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// The stacks are the entries' families of per-layer arguments, one set for
// the library: two entries ordering a layer's arguments differently would
// stack them differently.
// expected-error @+1 {{argument "h.0.a" is stacked with other layers' arguments than in another entry}}
func.func @step(%a0: tensor<4xf32> {tp.name = "h.0.a", tp.layer = #tp.layer<0>}, %b0: tensor<4xf32> {tp.name = "h.0.b", tp.layer = #tp.layer<0>},
                %a1: tensor<4xf32> {tp.name = "h.1.a", tp.layer = #tp.layer<1>}, %b1: tensor<4xf32> {tp.name = "h.1.b", tp.layer = #tp.layer<1>}) -> tensor<f32>
    attributes {tp.entry = "train_step"} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}
func.func @step_forward(%b0: tensor<4xf32> {tp.name = "h.0.b", tp.layer = #tp.layer<0>}, %a0: tensor<4xf32> {tp.name = "h.0.a", tp.layer = #tp.layer<0>},
                        %a1: tensor<4xf32> {tp.name = "h.1.a", tp.layer = #tp.layer<1>}, %b1: tensor<4xf32> {tp.name = "h.1.b", tp.layer = #tp.layer<1>}) -> tensor<f32>
    attributes {tp.entry = "forward"} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}
