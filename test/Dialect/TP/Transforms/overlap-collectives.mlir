// RUN: megatron-opt %s -split-input-file -tp-overlap-collectives -mlir-print-debuginfo | FileCheck %s

// The input gradient of a column-parallel GEMM is summed while the weight
// gradient, which does not read it, is computed; the wait stands before the
// first op that reads the sum.
// CHECK-LABEL: func.func @dgrad_under_wgrad(
// CHECK: %[[DX:.*]] = tp.matmul
// CHECK-NEXT: %[[P:.*]] = tp.all_reduce_start sum %[[DX]] over @m["tp"] {tp.phase = "backward"} : tensor<4x16xf32>
// CHECK-NEXT: %[[DW:.*]] = tp.weight_grad
// CHECK-NEXT: %[[SUM:.*]] = tp.wait %[[P]] {tp.phase = "backward"} : tensor<4x16xf32>
// CHECK-NEXT: tp.gelu %[[SUM]]
tp.mesh @m axes = ["tp" = 2]
func.func @dgrad_under_wgrad(%x: tensor<4x16xf32>, %dy: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<16x8xf32>) {
  %dx = tp.matmul %dy, %w {transpose_rhs, tp.phase = "backward"} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %dw = tp.weight_grad %x, %dy {tp.phase = "backward"} : tensor<4x16xf32>, tensor<4x8xf32> -> tensor<16x8xf32>
  %sum = tp.all_reduce sum %dx over @m["tp"] {tp.phase = "backward"} : tensor<4x16xf32>
  %next = tp.gelu %sum {tp.phase = "backward"} : tensor<4x16xf32>
  return %next, %dw : tensor<4x16xf32>, tensor<16x8xf32>
}

// -----

// Megatron's g, read by the very next op, the gradient norm and the loss,
// one-element sums the host computes, stay blocking, though compute could
// run under the last two.
// CHECK-LABEL: func.func @nothing_to_overlap(
// CHECK-NOT: tp.all_reduce_start
// CHECK: tp.g %{{.*}} over @m["tp"] : tensor<4x16xf32>
// CHECK: tp.g %{{.*}} over @m["tp"] : tensor<f32>
// CHECK: tp.all_reduce sum %{{.*}} over @m["tp"] : tensor<1xf32>
// CHECK-NOT: tp.all_reduce_start
tp.mesh @m axes = ["tp" = 2]
func.func @nothing_to_overlap(%y: tensor<4x16xf32>, %r: tensor<4x16xf32>, %s: f32, %l: tensor<f32>) -> (tensor<4x16xf32>, tensor<1xf32>, tensor<f32>) {
  %sum = tp.g %y over @m["tp"] : tensor<4x16xf32>
  %out = tp.add %sum, %r : tensor<4x16xf32>
  %loss = tp.g %l over @m["tp"] : tensor<f32>
  %norm = tensor.from_elements %s : tensor<1xf32>
  %gelu = tp.gelu %out : tensor<4x16xf32>
  %total = tp.all_reduce sum %norm over @m["tp"] : tensor<1xf32>
  return %gelu, %total, %loss : tensor<4x16xf32>, tensor<1xf32>, tensor<f32>
}

// -----

// A layer's sum stays inside the layer's run: its wait moves back to where
// the next layer's run begins rather than into it, so tp-outline-layers
// still calls each layer whole.
// CHECK-LABEL: func.func @inside_its_run(
// CHECK: %[[P:.*]] = tp.all_reduce_start sum %{{.*}} loc(#[[L0:.*]])
// CHECK-NEXT: tp.gelu {{.*}} loc(#[[L0]])
// CHECK-NEXT: %[[SUM:.*]] = tp.wait %[[P]] {{.*}} loc(#[[L0]])
// CHECK-NEXT: tp.gelu {{.*}} loc(#[[L1:.*]])
// CHECK-NEXT: tp.add %{{.*}}, %[[SUM]] {{.*}} loc(#[[L1]])
// CHECK-DAG: #[[L0]] = loc(fused<#tp.layer<0>>
// CHECK-DAG: #[[L1]] = loc(fused<#tp.layer<1>>
tp.mesh @m axes = ["tp" = 2]
func.func @inside_its_run(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %sum = tp.all_reduce sum %a over @m["tp"] : tensor<4x16xf32> loc(#l0)
  %x = tp.gelu %b : tensor<4x16xf32> loc(#l0)
  %y = tp.gelu %x : tensor<4x16xf32> loc(#l1)
  %z = tp.add %y, %sum : tensor<4x16xf32> loc(#l1)
  return %z : tensor<4x16xf32>
}
#l0 = loc(fused<#tp.layer<0>>["h.0"])
#l1 = loc(fused<#tp.layer<1>>["h.1"])

// -----

// A data-parallel bucket belongs to no one layer: it starts where the run
// that completed its last gradient ends, under the next layer's backward
// pass, and loses the layer in its location.
// CHECK-LABEL: func.func @bucket_under_backward(
// CHECK: %[[G1:.*]] = tp.gelu %{{.*}} loc(#[[L1:.*]])
// CHECK-NEXT: tp.gelu %[[G1]] {{.*}} loc(#[[L1]])
// CHECK-NEXT: %[[P:.*]] = tp.all_reduce_start sum %[[G1]], %{{.*}} over @m["dp"] {tp.phase = "backward"} : tensor<4x16xf32>, tensor<4x16xf32> loc(#[[NONE:.*]])
// CHECK-NEXT: tp.gelu {{.*}} loc(#[[L0:.*]])
// CHECK-NEXT: %[[SUMS:.*]]:2 = tp.wait %[[P]] {{.*}} loc(#[[NONE]])
// CHECK-NEXT: tp.add %[[SUMS]]#0, %[[SUMS]]#1
// CHECK-DAG: #[[NONE]] = loc("h.1.grad")
tp.mesh @m axes = ["dp" = 2]
func.func @bucket_under_backward(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %g1 = tp.gelu %a {tp.phase = "backward"} : tensor<4x16xf32> loc(#l1)
  %h1 = tp.gelu %g1 {tp.phase = "backward"} : tensor<4x16xf32> loc(#l1)
  %g0 = tp.gelu %h1 {tp.phase = "backward"} : tensor<4x16xf32> loc(#l0)
  %sums:2 = tp.all_reduce_bucket sum %g1, %b over @m["dp"] {tp.phase = "backward"} : tensor<4x16xf32>, tensor<4x16xf32> loc(#grad)
  %total = tp.add %sums#0, %sums#1 : tensor<4x16xf32>
  return %total, %g0 : tensor<4x16xf32>, tensor<4x16xf32>
}
#l0 = loc(fused<#tp.layer<0>>["h.0"])
#l1 = loc(fused<#tp.layer<1>>["h.1"])
#grad = loc(fused<#tp.layer<1>>["h.1.grad"])

// -----

// ZeRO-1's gradient reduce-scatters over dp, a bucket and a lone one, start
// as their gradients are complete and are waited for where the optimizer
// reads them.
// CHECK-LABEL: func.func @zero_gradients(
// CHECK: %[[DW:.*]] = tp.weight_grad
// CHECK-NEXT: %[[P:.*]] = tp.reduce_scatter_start sum %[[DW]], %{{.*}} over @m["dp"] {tp.phase = "backward"} : tensor<16x8xf32>, tensor<8xf32>
// CHECK-NEXT: %[[DX:.*]] = tp.matmul
// CHECK-NEXT: %[[Q:.*]] = tp.reduce_scatter_start sum %[[DX]] over @m["dp"] {tp.phase = "backward"} : tensor<4x16xf32>
// CHECK-NEXT: tp.gelu
// CHECK-NEXT: %[[ROWS:.*]]:2 = tp.wait %[[P]] {tp.phase = "backward"} : tensor<8x8xf32>, tensor<4xf32>
// CHECK-NEXT: %[[X_ROWS:.*]] = tp.wait %[[Q]] {tp.phase = "backward"} : tensor<2x16xf32>
// CHECK-NEXT: tp.sum_squares %[[ROWS]]#0, %[[ROWS]]#1, %[[X_ROWS]]
tp.mesh @m axes = ["dp" = 2]
func.func @zero_gradients(%x: tensor<4x16xf32>, %dy: tensor<4x8xf32>, %w: tensor<16x8xf32>, %db: tensor<8xf32>) -> (tensor<4x16xf32>, f32) {
  %dw = tp.weight_grad %x, %dy {tp.phase = "backward"} : tensor<4x16xf32>, tensor<4x8xf32> -> tensor<16x8xf32>
  %dx = tp.matmul %dy, %w {transpose_rhs, tp.phase = "backward"} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %next = tp.gelu %dx {tp.phase = "backward"} : tensor<4x16xf32>
  %rows:2 = tp.reduce_scatter_bucket sum %dw, %db over @m["dp"] {tp.phase = "backward"} : tensor<16x8xf32>, tensor<8xf32> -> tensor<8x8xf32>, tensor<4xf32>
  %x_rows = tp.reduce_scatter sum %dx over @m["dp"] dim = 0 {tp.phase = "backward"} : tensor<4x16xf32> -> tensor<2x16xf32>
  %squares = tp.sum_squares %rows#0, %rows#1, %x_rows {tp.phase = "optimizer"} : tensor<8x8xf32>, tensor<4xf32>, tensor<2x16xf32>
  return %next, %squares : tensor<4x16xf32>, f32
}

// -----

// ZeRO-1's gathers of updated rows start after their update and are waited
// for where the rows are written back, after the later updates: the first
// gather runs under the second update.
// CHECK-LABEL: func.func @zero_gathers(
// CHECK: %[[NEW:[a-z_0-9]+]], {{.*}} = tp.adamw
// CHECK-NEXT: %[[P:.*]] = tp.all_gather_start %[[NEW]] over @m["dp"] {tp.phase = "optimizer"} : tensor<4x8xbf16>
// CHECK-NEXT: tp.adamw
// CHECK-NEXT: %[[WHOLE:.*]] = tp.wait %[[P]] {tp.phase = "optimizer"} : tensor<8x8xbf16>
// CHECK-NEXT: bufferization.materialize_in_destination %[[WHOLE]] in
tp.mesh @m axes = ["dp" = 2]
func.func @zero_gathers(%w: tensor<8x8xbf16>, %rows: tensor<4x8xbf16>, %g: tensor<4x8xbf16>, %m: tensor<4x8xbf16>, %v: tensor<4x8xbf16>,
                        %b: tensor<8xf32>, %bg: tensor<8xf32>, %bm: tensor<8xf32>, %bv: tensor<8xf32>,
                        %hp: tensor<8xf32>, %scale: f32, %apply: i1) -> (tensor<8x8xbf16>, tensor<8xf32>) {
  %new:3 = tp.adamw %rows, %g, %m, %v, %hp, %scale if %apply {tp.phase = "optimizer"} : tensor<4x8xbf16>, tensor<8xf32>
  %whole = tp.all_gather %new#0 over @m["dp"] dim = 0 {tp.phase = "optimizer"} : tensor<4x8xbf16> -> tensor<8x8xbf16>
  %other:3 = tp.adamw %b, %bg, %bm, %bv, %hp, %scale if %apply {tp.phase = "optimizer"} : tensor<8xf32>, tensor<8xf32>
  %written = bufferization.materialize_in_destination %whole in %w {tp.phase = "optimizer"} : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  return %written, %other#0 : tensor<8x8xbf16>, tensor<8xf32>
}
