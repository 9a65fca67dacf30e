// RUN: megatron-opt %s -split-input-file -megatron-expand-reshapes | FileCheck %s

// A merged dimension a contraction writes ([heads x head width] of a
// weight) becomes loops of its own: the matmul reads the weight as it is.
// CHECK-LABEL: func.func @heads(
// CHECK-SAME: %[[X:.+]]: tensor<3x8xf32>, %[[W:.+]]: tensor<8x2x4xf32>)
// CHECK-NOT: tensor.collapse_shape %[[W]]
// CHECK: %[[Y:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[X]], %[[W]] : tensor<3x8xf32>, tensor<8x2x4xf32>) outs(%{{.+}} : tensor<3x2x4xf32>)
// CHECK: %[[R:.+]] = tensor.collapse_shape %[[Y]] {{\[\[}}0], [1, 2]] : tensor<3x2x4xf32> into tensor<3x8xf32>
// CHECK: return %[[R]]
func.func @heads(%x: tensor<3x8xf32>, %arg: tensor<8x2x4xf32>) -> tensor<3x8xf32> {
  %w = tensor.collapse_shape %arg [[0], [1, 2]] : tensor<8x2x4xf32> into tensor<8x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<3x8xf32>) -> tensor<3x8xf32>
  %y = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x8xf32>) outs(%init : tensor<3x8xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

// A chain that merges [3, heads, head width] and splits it again is one
// reshape, which keeps the heads: the op runs over the tensor's own
// dimensions, and only the last two are merged, after it.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME: %[[G:.+]]: tensor<3x4x8x2x8xf32>)
// CHECK-NOT: 96
// CHECK: %[[Y:.+]] = linalg.generic {{.*}} ins(%[[G]] : tensor<3x4x8x2x8xf32>) outs(%{{.+}} : tensor<3x4x8x2x8xf32>)
// CHECK: %[[R:.+]] = tensor.collapse_shape %[[Y]] {{\[\[}}0], [1], [2], [3, 4]] : tensor<3x4x8x2x8xf32> into tensor<3x4x8x16xf32>
// CHECK: return %[[R]]
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @chain(%g: tensor<3x4x8x2x8xf32>) -> tensor<3x4x8x16xf32> {
  %merged = tensor.collapse_shape %g [[0, 1, 2], [3, 4]] : tensor<3x4x8x2x8xf32> into tensor<96x16xf32>
  %split = tensor.expand_shape %merged [[0, 1, 2], [3]] output_shape [3, 4, 8, 16] : tensor<96x16xf32> into tensor<3x4x8x16xf32>
  %e = tensor.empty() : tensor<3x4x8x16xf32>
  %y = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%split : tensor<3x4x8x16xf32>) outs(%e : tensor<3x4x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<3x4x8x16xf32>
  return %y : tensor<3x4x8x16xf32>
}


// -----

// A reshape that only drops a unit dimension merges nothing a plan could
// split, and stays: folding such reshapes after composition would expand
// without end.
// CHECK-LABEL: func.func @unit(
// CHECK: %[[C:.+]] = tensor.collapse_shape %{{.+}} {{\[\[}}0], [1, 2]] : tensor<8x1x16xf32> into tensor<8x16xf32>
// CHECK: linalg.generic {{.*}} ins(%[[C]] : tensor<8x16xf32>)
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @unit(%x: tensor<8x1x16xf32>) -> tensor<8x16xf32> {
  %c = tensor.collapse_shape %x [[0], [1, 2]] : tensor<8x1x16xf32> into tensor<8x16xf32>
  %e = tensor.empty() : tensor<8x16xf32>
  %y = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%c : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
