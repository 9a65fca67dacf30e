// RUN: megatron-opt %s -split-input-file -tp-propagate -tp-insert-conjugates -verify-diagnostics | FileCheck %s

// Megatron's MLP: f where the replicated input enters the column-parallel
// GEMM, g where the row-parallel GEMM's partial sum must become whole, and
// the row-parallel bias added once, after g.

// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x16xf32>
// CHECK: %[[F:.*]] = tp.f %[[X]] over @m["tp"]
// CHECK: %[[H:.*]] = tp.matmul %[[F]],
// CHECK: %[[A:.*]] = tp.gelu %[[H]]
// CHECK: %[[Y:.*]] = tp.matmul %[[A]],
// CHECK: %[[G:.*]] = tp.g %[[Y]] over @m["tp"] {tp.sharding = #tp.sharding<@m, {{\[\[}}], []]>}
// CHECK: tp.bias_add %[[G]],
// CHECK-NOT: tp.f
// CHECK-NOT: tp.g
tp.mesh @m axes = ["tp" = 4]
func.func @mlp(%x: tensor<8x16xf32>,
               %a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
               %b: tensor<64x16xf32>, %bias: tensor<16xf32>) -> tensor<8x16xf32> {
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  %g = tp.gelu %h : tensor<8x64xf32>
  %y = tp.matmul %g, %b : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32>
  %z = tp.bias_add %y, %bias : tensor<8x16xf32>, tensor<16xf32>
  return %z : tensor<8x16xf32>
}

// -----

// A partial sum leaving the function is completed by g; token ids get no f.

// CHECK-LABEL: func.func @embedding(
// CHECK-SAME: %[[TABLE:[a-z0-9]+]]: tensor<16x8xf32>
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<2x4xi32>
// CHECK: %[[E:.*]] = tp.embedding %[[TABLE]][%[[IDS]]]
// CHECK: %[[G:.*]] = tp.g %[[E]]
// CHECK: return %[[G]]
tp.mesh @m axes = ["tp" = 2]
func.func @embedding(%table: tensor<16x8xf32> {tp.sharding = #tp.sharding<@m, [["tp"], []]>},
                     %ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %e = tp.embedding %table[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  return %e : tensor<2x4x8xf32>
}

// -----

// A replicated weight that must be row-split is resharded (sliced locally).

// CHECK-LABEL: func.func @slice_replicated(
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<64x16xf32>
// CHECK: %[[R:.*]] = tp.reshard %[[B]] {tp.sharding = #tp.sharding<@m, {{\[}}["tp"], []]>}
// CHECK: tp.matmul %{{.*}}, %[[R]]
tp.mesh @m axes = ["tp" = 2]
func.func @slice_replicated(%x: tensor<8x16xf32>,
                            %a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
                            %b: tensor<64x16xf32> {tp.sharding = #tp.sharding<@m, [[], []]>}) -> tensor<8x16xf32> {
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  // expected-remark @+1 {{kept ["tp"] over []; tensors that disagree are resharded}}
  %y = tp.matmul %h, %b : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// An axis of size 1 splits nothing: no conjugates.

// CHECK-LABEL: func.func @tp1(
// CHECK-NOT: tp.f
// CHECK-NOT: tp.g
// CHECK: return
tp.mesh @m axes = ["tp" = 1]
func.func @tp1(%x: tensor<8x16xf32>,
               %a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
               %b: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  %y = tp.matmul %h, %b : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// One value read by three split GEMMs (Llama's q, k and v projections):
// one f right after it, shared by the three.

// CHECK-LABEL: func.func @shared_f(
// CHECK: %[[H:.*]] = tp.gelu
// CHECK-NEXT: %[[F:.*]] = tp.f %[[H]] over @m["tp"]
// CHECK-NOT: tp.f
// CHECK: tp.matmul %[[F]], %{{.*}}
// CHECK: tp.matmul %[[F]], %{{.*}}
// CHECK: tp.matmul %[[F]], %{{.*}}
tp.mesh @m axes = ["tp" = 2]
func.func @shared_f(%x: tensor<4x8xf32>,
                    %wq: tensor<8x8xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
                    %wk: tensor<8x8xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
                    %wv: tensor<8x8xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>})
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %h = tp.gelu %x : tensor<4x8xf32>
  %q = tp.matmul %h, %wq : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %k = tp.matmul %h, %wk : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %v = tp.matmul %h, %wv : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  return %q, %k, %v : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Grouped-query attention at more ranks than key/value heads: each of the
// 2 key/value heads is read by the query heads of 2 ranks ("tp_rep"), so
// its cotangent is partial over them. The f that completes it moves up
// through the rotary embedding and the projection: onto the projection's
// weight (a per-step reduction over "tp_rep") and into the normalised
// activation's f over "tp", which the query projection needs anyway. No f
// is left on an activation of the key/value heads.

// CHECK-LABEL: func.func @gqa_more_ranks_than_kv_heads(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4x32xf32>
// CHECK-SAME: %[[WQ:[a-z0-9]+]]: tensor<32x32xf32>
// CHECK-SAME: %[[WK:[a-z0-9]+]]: tensor<32x8xf32>
// CHECK-SAME: %[[WV:[a-z0-9]+]]: tensor<32x8xf32>
// CHECK-DAG: %[[FV:.*]] = tp.f %[[WV]] over @m["tp_rep"]
// CHECK-DAG: %[[FK:.*]] = tp.f %[[WK]] over @m["tp_rep"]
// CHECK-DAG: %[[FX:.*]] = tp.f %[[X]] over @m["tp"]
// CHECK: tp.matmul %[[FX]], %[[WQ]]
// CHECK: %[[K:.*]] = tp.matmul %[[FX]], %[[FK]]
// CHECK: %[[V:.*]] = tp.matmul %[[FX]], %[[FV]]
// CHECK: %[[RK:.*]] = tp.rope %[[K]] heads = 2
// CHECK: tp.attention %{{.*}}, %[[RK]], %[[V]] heads = 8 kv_heads = 2
// CHECK-NOT: tp.f
tp.mesh @m axes = ["tp" = 4 ["tp_kv" = 2, "tp_rep" = 2]]
func.func @gqa_more_ranks_than_kv_heads(%x: tensor<2x4x32xf32>,
    %wq: tensor<32x32xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
    %wk: tensor<32x8xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp_kv"]]>},
    %wv: tensor<32x8xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp_kv"]]>}) -> tensor<2x4x32xf32> {
  %q = tp.matmul %x, %wq : tensor<2x4x32xf32>, tensor<32x32xf32> -> tensor<2x4x32xf32>
  %k = tp.matmul %x, %wk : tensor<2x4x32xf32>, tensor<32x8xf32> -> tensor<2x4x8xf32>
  %v = tp.matmul %x, %wv : tensor<2x4x32xf32>, tensor<32x8xf32> -> tensor<2x4x8xf32>
  %rq = tp.rope %q heads = 8 theta = 1.0e4 : tensor<2x4x32xf32>
  %rk = tp.rope %k heads = 2 theta = 1.0e4 : tensor<2x4x8xf32>
  %a = tp.attention %rq, %rk, %v heads = 8 kv_heads = 2 : tensor<2x4x32xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x32xf32>
  %r = tp.reshard %a {tp.sharding = #tp.sharding<@m, [[], [], []]>} : tensor<2x4x32xf32>
  return %r : tensor<2x4x32xf32>
}

// -----

// An f moves up only where it reduces fewer elements: the 2 rows a
// data-parallel step reads of a 64-row table keep their own f rather than
// the table taking one.

// CHECK-LABEL: func.func @f_stays_on_small_value(
// CHECK-SAME: %[[TABLE:[a-z0-9]+]]: tensor<64x8xf32>
// CHECK: %[[ROWS:.*]] = tp.position_embedding %[[TABLE]]
// CHECK: tp.f %[[ROWS]] over @m["dp"]
tp.mesh @m axes = ["dp" = 2]
func.func @f_stays_on_small_value(%table: tensor<64x8xf32>,
    %x: tensor<4x2x8xf32> {tp.sharding = #tp.sharding<@m, [["dp"], [], []]>}) -> tensor<4x2x8xf32> {
  %rows = tp.position_embedding %table : tensor<64x8xf32> -> tensor<2x8xf32>
  %y = tp.bias_add %x, %rows : tensor<4x2x8xf32>, tensor<2x8xf32>
  return %y : tensor<4x2x8xf32>
}
