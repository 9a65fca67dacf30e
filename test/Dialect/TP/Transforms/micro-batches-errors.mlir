// What a loop over micro-batches cannot stand in for is refused at the op.
// RUN: megatron-opt %s -split-input-file -tp-micro-batches -verify-diagnostics

tp.mesh @mesh axes = ["mb" = 2, "tp" = 1]
func.func @returns_activation(%ids: tensor<2x4xi32> {tp.sharding = #tp.sharding<@mesh, [["mb"], []]>},
                              %wte: tensor<16x8xf32>) -> tensor<2x4x8xf32> {
  %x = tp.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  // expected-error @+1 {{'func.return' op returns a value of one micro-batch: only sums over "mb" leave the micro-batch loop}}
  return %x : tensor<2x4x8xf32>
}

// -----

tp.mesh @mesh axes = ["mb" = 2, "tp" = 1]
// expected-error @+1 {{argument #0 is laid out #tp.sharding<@mesh, [[], ["mb"]]>: micro-batches split only dimension 0, innermost}}
func.func @split_columns(%ids: tensor<4x2xi32> {tp.sharding = #tp.sharding<@mesh, [[], ["mb"]]>}) {
  return
}

// -----

tp.mesh @mesh axes = ["mb" = 2, "tp" = 1]
func.func @sum_and_term(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@mesh, [["mb"], []]>}) -> tensor<4x8xf32> {
  %s = tp.all_reduce sum %x over @mesh["mb"] : tensor<4x8xf32>
  // expected-error @+1 {{'tp.add' op reads both a sum over micro-batches and a value of one micro-batch}}
  %y = tp.add %s, %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

tp.mesh @mesh axes = ["mb" = 2, "tp" = 1]
func.func @gather(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@mesh, [["mb"], []]>}) -> tensor<8x8xf32> {
  // expected-error @+1 {{'tp.all_gather' op runs over the micro-batch axis "mb", which is a loop: only a sum can be accumulated}}
  %y = tp.all_gather %x over @mesh["mb"] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

tp.mesh @mesh axes = ["mb" = 2, "tp" = 1]
func.func @twice(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@mesh, [["mb"], []]>}) -> tensor<4x8xf32> {
  %s = tp.all_reduce sum %x over @mesh["mb"] : tensor<4x8xf32>
  // expected-error @+1 {{'tp.all_reduce' op sums over micro-batches a value already summed over them}}
  %t = tp.all_reduce sum %s over @mesh["mb"] : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

tp.mesh @mesh axes = ["mb" = 2, "tp" = 1]
func.func @integers(%x: tensor<4x8xi32> {tp.sharding = #tp.sharding<@mesh, [["mb"], []]>}) -> tensor<4x8xi32> {
  // expected-error @+1 {{'tp.all_reduce' op sums a non-float value over micro-batches}}
  %s = tp.all_reduce sum %x over @mesh["mb"] : tensor<4x8xi32>
  return %s : tensor<4x8xi32>
}
