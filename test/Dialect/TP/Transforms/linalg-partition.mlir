// RUN: megatron-opt %s -split-input-file -megatron-partition-pipeline | FileCheck %s

// linalg programs, as frameworks lower them, partitioned from the shardings
// of a few arguments: each structured op's rule comes from its indexing maps
// and iterator types (lib/Dialect/TP/Extensions).

// JAX's Megatron MLP with only its first weight split by columns: the bias
// and the second weight follow (split, row-split), the second GEMM's sum is
// partial, and one all-reduce completes it before the output bias. No f (the
// framework wrote the backward), no all-gather of the wide hidden tensor.

// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: tensor<4x8xf32> {tp.global_shape = array<i64: 4, 8>, tp.sharding = #tp.sharding<@mesh, {{\[\[}}], []]>}
// CHECK-SAME: tensor<8x16xf32> {tp.global_shape = array<i64: 8, 32>, tp.sharding = #tp.sharding<@mesh, {{\[\[}}], ["tp"]]>}
// CHECK-SAME: tensor<16xf32> {tp.global_shape = array<i64: 32>, tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"]]>}
// CHECK-SAME: tensor<16x8xf32> {tp.global_shape = array<i64: 32, 8>, tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>}
// CHECK-SAME: tensor<8xf32> {tp.global_shape = array<i64: 8>, tp.sharding = #tp.sharding<@mesh, {{\[\[}}]]>}
// CHECK-NOT: tp.f
// CHECK-NOT: tp.all_gather
// CHECK: %[[H:.+]] = linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<4x8xf32>, tensor<8x16xf32>) outs(%{{.+}} : tensor<4x16xf32>)
// CHECK: %[[A:.+]] = linalg.generic {{.*}} ins(%[[H]], %{{.+}} : tensor<4x16xf32>, tensor<16xf32>)
// CHECK: %[[Y:.+]] = linalg.matmul ins(%[[A]], %{{.+}} : tensor<4x16xf32>, tensor<16x8xf32>) outs(%{{.+}} : tensor<4x8xf32>)
// CHECK-NOT: tp.
// CHECK: %[[SUM:.+]] = tp.g %[[Y]] over @mesh["tp"] : tensor<4x8xf32>
// CHECK-NOT: tp.
// CHECK: linalg.generic {{.*}} ins(%[[SUM]], %{{.+}} : tensor<4x8xf32>, tensor<8xf32>)
// CHECK-NOT: tp.
// CHECK: return

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
tp.mesh @mesh axes = ["tp" = 2]
func.func @mlp(%x: tensor<4x8xf32>,
               %w1: tensor<8x32xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>},
               %b1: tensor<32xf32>, %w2: tensor<32x8xf32>, %b2: tensor<8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x32xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x32xf32>) -> tensor<4x32xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x32xf32>) outs(%f0 : tensor<4x32xf32>) -> tensor<4x32xf32>
  %e1 = tensor.empty() : tensor<4x32xf32>
  %a = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h, %b1 : tensor<4x32xf32>, tensor<32xf32>) outs(%e1 : tensor<4x32xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    %t = math.tanh %s : f32
    linalg.yield %t : f32
  } -> tensor<4x32xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.matmul ins(%a, %w2 : tensor<4x32xf32>, tensor<32x8xf32>) outs(%f2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e3 = tensor.empty() : tensor<4x8xf32>
  %z = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b2 : tensor<4x8xf32>, tensor<8xf32>) outs(%e3 : tensor<4x8xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// A sum over split columns into a non-zero accumulator: each rank sums its
// columns, the accumulator is added on the first rank only, and the partial
// results are all-reduced.

// CHECK-LABEL: func.func @sum_into(
// CHECK-SAME: %[[X:.+]]: tensor<4x4xf32> {{.*}}, %[[ACC:.+]]: tensor<4xf32>
// CHECK: %[[C0:.+]] = arith.constant 0 : index
// CHECK: %[[RANK:.+]] = tp.axis_index @mesh["tp"]
// CHECK: %[[FIRST:.+]] = arith.cmpi eq, %[[RANK]], %[[C0]] : index
// CHECK: %[[ZEROS:.+]] = arith.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: %[[INIT:.+]] = linalg.generic {{.*}} ins(%[[ACC]], %[[ZEROS]] : tensor<4xf32>, tensor<4xf32>)
// CHECK: arith.select %[[FIRST]]
// CHECK: %[[PART:.+]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4x4xf32>) outs(%[[INIT]] : tensor<4xf32>)
// CHECK: %[[ALL:.+]] = tp.g %[[PART]] over @mesh["tp"] : tensor<4xf32>
// CHECK: return %[[ALL]]

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
tp.mesh @mesh axes = ["tp" = 2]
func.func @sum_into(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>}, %acc: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A max is no sum: its reduced dimension cannot stay split, so the input is
// gathered and every rank reduces all of it.

// CHECK-LABEL: func.func @max(
// CHECK-SAME: %[[X:.+]]: tensor<4x4xf32>
// CHECK: %[[WHOLE:.+]] = tp.all_gather %[[X]] over @mesh["tp"] dim = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK: %[[MAX:.+]] = linalg.generic {{.*}} ins(%[[WHOLE]] : tensor<4x8xf32>)
// CHECK: arith.maximumf
// CHECK-NOT: tp.g
// CHECK: return %[[MAX]]

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
tp.mesh @mesh axes = ["tp" = 2]
func.func @max(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>}, %acc: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.maximumf %out, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// linalg.index of a split loop counts from the rank's first column.

// CHECK-LABEL: func.func @iota(
// CHECK: %[[RANK:.+]] = tp.axis_index @mesh["tp"]
// CHECK: %[[C4:.+]] = arith.constant 4 : index
// CHECK: %[[FIRST:.+]] = arith.muli %[[RANK]], %[[C4]] : index
// CHECK: linalg.generic
// CHECK: %[[LOCAL:.+]] = linalg.index 1 : index
// CHECK: %[[GLOBAL:.+]] = arith.addi %[[LOCAL]], %[[FIRST]] : index
// CHECK: arith.index_cast %[[GLOBAL]]

#id = affine_map<(d0, d1) -> (d0, d1)>
tp.mesh @mesh axes = ["tp" = 2]
func.func @iota(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>}) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %j = linalg.index 1 : index
    %i = arith.index_cast %j : index to i64
    %f = arith.sitofp %i : i64 to f32
    %s = arith.addf %in, %f : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// Heads through reshapes and a slice: a split of the merged width is a
// split of its outer part (the heads), a slice taken whole along the heads
// keeps them split, and a splat constant is built at the local shape.

// CHECK-LABEL: func.func @heads(
// CHECK-SAME: %[[X:.+]]: tensor<2x4x16xf32>
// CHECK-SAME: -> tensor<1x4x16xf32>
// CHECK: %[[H:.+]] = tensor.expand_shape %[[X]] {{\[\[}}0], [1], [2, 3]] output_shape [2, 4, 2, 8] : tensor<2x4x16xf32> into tensor<2x4x2x8xf32>
// CHECK: arith.constant dense<1.000000e+00> : tensor<2x4x2x8xf32>
// CHECK: %[[S:.+]] = linalg.generic {{.*}} ins(%[[H]], %{{.+}} : tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>)
// CHECK: %[[FIRST:.+]] = tensor.extract_slice %[[S]][0, 0, 0, 0] [1, 4, 2, 8] [1, 1, 1, 1] : tensor<2x4x2x8xf32> to tensor<4x2x8xf32>
// CHECK: %[[C:.+]] = tensor.collapse_shape %[[FIRST]] {{\[\[}}0], [1, 2]] : tensor<4x2x8xf32> into tensor<4x16xf32>
// CHECK: tensor.expand_shape %[[C]] {{\[\[}}0, 1], [2]] output_shape [1, 4, 16] : tensor<4x16xf32> into tensor<1x4x16xf32>
// CHECK-NOT: tp.

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
tp.mesh @mesh axes = ["tp" = 2]
func.func @heads(%x: tensor<2x4x32xf32> {tp.sharding = #tp.sharding<@mesh, [[], [], ["tp"]]>}) -> tensor<1x4x32xf32> {
  %h = tensor.expand_shape %x [[0], [1], [2, 3]] output_shape [2, 4, 4, 8] : tensor<2x4x32xf32> into tensor<2x4x4x8xf32>
  %one = arith.constant dense<1.0> : tensor<2x4x4x8xf32>
  %e = tensor.empty() : tensor<2x4x4x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%h, %one : tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) outs(%e : tensor<2x4x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4x8xf32>
  %first = tensor.extract_slice %s[0, 0, 0, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<2x4x4x8xf32> to tensor<4x4x8xf32>
  %c = tensor.collapse_shape %first [[0], [1, 2]] : tensor<4x4x8xf32> into tensor<4x32xf32>
  %back = tensor.expand_shape %c [[0, 1], [2]] output_shape [1, 4, 32] : tensor<4x32xf32> into tensor<1x4x32xf32>
  return %back : tensor<1x4x32xf32>
}
