// RUN: megatron-opt %s -split-input-file -tp-megatron-annotate=tp=4 -verify-diagnostics | FileCheck %s

// Grouped-query attention with more ranks than key/value heads (tp=4, 2 of
// them): "tp" is factored into the key/value head ("tp_kv", major) and the
// ranks sharing it ("tp_rep"); the key and value projections split their
// whole heads over "tp_kv" (each replicated on 2 ranks), the query
// projection over "tp".

// CHECK: tp.mesh @mesh axes = ["tp" = 4 ["tp_kv" = 2, "tp_rep" = 2]]
// CHECK-LABEL: func.func @gqa(
// CHECK-SAME: %arg1: tensor<32x32xf32> {tp.sharding = #tp.sharding<@mesh, {{\[\[}}], ["tp"]]>}
// CHECK-SAME: %arg2: tensor<32x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[\[}}], ["tp_kv"]]>}
// CHECK-SAME: %arg3: tensor<32x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[\[}}], ["tp_kv"]]>}
// CHECK-SAME: %arg4: tensor<32x32xf32> {tp.sharding = #tp.sharding<@mesh, {{\[\[}}"tp"], []]>}
func.func @gqa(%x: tensor<2x4x32xf32>, %wq: tensor<32x32xf32>, %wk: tensor<32x8xf32>, %wv: tensor<32x8xf32>, %wo: tensor<32x32xf32>) -> tensor<2x4x32xf32> {
  %q = tp.matmul %x, %wq : tensor<2x4x32xf32>, tensor<32x32xf32> -> tensor<2x4x32xf32>
  %k = tp.matmul %x, %wk : tensor<2x4x32xf32>, tensor<32x8xf32> -> tensor<2x4x8xf32>
  %v = tp.matmul %x, %wv : tensor<2x4x32xf32>, tensor<32x8xf32> -> tensor<2x4x8xf32>
  %rq = tp.rope %q heads = 8 theta = 1.0e4 : tensor<2x4x32xf32>
  %rk = tp.rope %k heads = 2 theta = 1.0e4 : tensor<2x4x8xf32>
  %a = tp.attention %rq, %rk, %v heads = 8 kv_heads = 2 : tensor<2x4x32xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x32xf32>
  %o = tp.matmul %a, %wo : tensor<2x4x32xf32>, tensor<32x32xf32> -> tensor<2x4x32xf32>
  return %o : tensor<2x4x32xf32>
}

// -----

// Key/value heads that tp neither divides nor is a multiple of.
func.func @kv_heads_tp(%q: tensor<2x4x24xf32>, %k: tensor<2x4x6xf32>) -> tensor<2x4x24xf32> {
  // expected-error @+1 {{tensor-parallel size 4 neither divides the 3 key/value heads nor is a multiple of them}}
  %a = tp.attention %q, %k, %k heads = 12 kv_heads = 3 : tensor<2x4x24xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x24xf32>
  return %a : tensor<2x4x24xf32>
}
