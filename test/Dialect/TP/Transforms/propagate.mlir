// RUN: megatron-opt %s -split-input-file -tp-propagate -verify-diagnostics | FileCheck %s

// A Megatron MLP with only its first weight annotated column-split: the
// second weight is inferred row-split and the product becomes a partial sum,
// the one-all-reduce plan.

// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<8x16xf32> {tp.sharding = #tp.sharding<@m, {{\[\[}}], []]>}
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<64x16xf32> {tp.sharding = #tp.sharding<@m, {{\[}}["tp"], []]>}
// CHECK: tp.matmul {{.*}}tp.sharding = #tp.sharding<@m, {{\[\[}}], ["tp"]]>
// CHECK: tp.gelu {{.*}}tp.sharding = #tp.sharding<@m, {{\[\[}}], ["tp"]]>
// CHECK: tp.matmul {{.*}}tp.sharding = #tp.sharding<@m, {{\[\[}}], []], partial = ["tp"]>
tp.mesh @m axes = ["tp" = 4]
func.func @mlp(%x: tensor<8x16xf32>,
               %a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
               %b: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  %g = tp.gelu %h : tensor<8x64xf32>
  %y = tp.matmul %g, %b : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Sections flow through the fused QKV: the attention's input keeps whole
// heads of q, k and v on each rank, its output is split by heads.

// CHECK-LABEL: func.func @qkv(
// CHECK: tp.bias_add {{.*}}#tp.sharding<@m, {{\[\[}}], [], ["tp"]], sections = [1, 1, 3]>
// CHECK: tp.attention {{.*}}#tp.sharding<@m, {{\[\[}}], [], ["tp"]]>}
tp.mesh @m axes = ["tp" = 2]
func.func @qkv(%x: tensor<2x4x8xf32>,
               %w: tensor<8x24xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]], sections = [1, 3]>},
               %b: tensor<24xf32>) -> tensor<2x4x8xf32> {
  %qkv = tp.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x24xf32> -> tensor<2x4x24xf32>
  %qkvb = tp.bias_add %qkv, %b : tensor<2x4x24xf32>, tensor<24xf32>
  %a = tp.attention %qkvb heads = 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  return %a : tensor<2x4x8xf32>
}

// -----

// An RMS norm keeps its normalised dimension whole: the batch split flows
// through it, and its weight stays replicated.

// CHECK-LABEL: func.func @rms_norm(
// CHECK: tp.rms_norm {{.*}}#tp.sharding<@m, {{\[}}["tp"], [], []]>
tp.mesh @m axes = ["tp" = 2]
func.func @rms_norm(%x: tensor<2x4x8xf32> {tp.sharding = #tp.sharding<@m, [["tp"], [], []]>},
                    %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %h = tp.rms_norm %x, %w : tensor<2x4x8xf32>, tensor<8xf32>
  return %h : tensor<2x4x8xf32>
}

// -----

// Propagation also runs backward: a constraint on the hidden activation
// splits the weight that produces it.

// CHECK-LABEL: func.func @backward(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, {{\[\[}}], ["tp"]]>}
tp.mesh @m axes = ["tp" = 2]
func.func @backward(%x: tensor<8x16xf32>, %a: tensor<16x64xf32>) -> tensor<8x64xf32> {
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  %c = tp.reshard %h {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>} : tensor<8x64xf32>
  return %c : tensor<8x64xf32>
}

// -----

// A replicated user annotation meets an inferred split: the split wins, since
// each rank slices a replicated value for free, and a remark says so.

tp.mesh @m axes = ["tp" = 2]
func.func @conflict(%x: tensor<8x16xf32>,
                    %a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
                    %b: tensor<64x16xf32> {tp.sharding = #tp.sharding<@m, [[], []]>}) -> tensor<8x16xf32> {
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  // expected-remark @+1 {{conflicting shardings of factor #2: kept ["tp"] over []; tensors that disagree are resharded}}
  %y = tp.matmul %h, %b : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @user_conflict(%x: tensor<8x16xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
                         %a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, [[], []]>}) -> tensor<8x64xf32> {
  // expected-error @+1 {{conflicting user shardings: factor #2 is annotated ["tp"] and []}}
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  return %h : tensor<8x64xf32>
}

// -----

// A reshard between two annotated layouts is no conflict: it is the change.
// CHECK-LABEL: func.func @explicit_reshard(
// CHECK: tp.reshard %{{.*}} {tp.sharding = #tp.sharding<@m, {{\[\[}}], []]>}
tp.mesh @m axes = ["tp" = 2]
func.func @explicit_reshard(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>}) -> tensor<4x8xf32> {
  %r = tp.reshard %x {tp.sharding = #tp.sharding<@m, [[], []]>} : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// Annotations on two meshes: propagation works within one.
tp.mesh @a axes = ["tp" = 2]
tp.mesh @b axes = ["tp" = 2]
// expected-error @+1 {{shardings name two meshes, @a and @b; propagation works on one}}
func.func @two_meshes(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@a, [[], ["tp"]]>},
                      %y: tensor<4x8xf32> {tp.sharding = #tp.sharding<@b, [[], []]>}) {
  return
}
