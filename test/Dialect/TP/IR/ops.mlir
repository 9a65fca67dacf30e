// RUN: megatron-opt %s | megatron-opt | FileCheck %s
// RUN: megatron-opt %s --mlir-print-op-generic | megatron-opt | FileCheck %s

// CHECK: tp.mesh @m axes = ["dp" = 1, "tp" = 4]
tp.mesh @m axes = ["dp" = 1, "tp" = 4]
// An axis factored into sub-axes, major to minor.
// CHECK: tp.mesh @g axes = ["dp" = 2, "tp" = 4 ["tp_kv" = 2, "tp_rep" = 2]]
tp.mesh @g axes = ["dp" = 2, "tp" = 4 ["tp_kv" = 2, "tp_rep" = 2]]

// CHECK-LABEL: func.func @transformer_ops
// CHECK-SAME: %[[WTE:.*]]: tensor<64x16xf32> {tp.sharding = #tp.sharding<@m, {{\[}}["tp"], []]>}
func.func @transformer_ops(%wte: tensor<64x16xf32> {tp.sharding = #tp.sharding<@m, [["tp"], []]>},
                           %wpe: tensor<8x16xf32>, %ids: tensor<2x8xi32>,
                           %w: tensor<16xf32>, %b: tensor<16xf32>,
                           %c_attn: tensor<16x48xf32>, %c_proj: tensor<16x16xf32>) -> tensor<f32> {
  // CHECK: %[[TOK:.*]] = tp.embedding %[[WTE]][%{{.*}}] : tensor<64x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
  %tok = tp.embedding %wte[%ids] : tensor<64x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
  // CHECK: tp.position_embedding %{{.*}} : tensor<8x16xf32> -> tensor<4x16xf32>
  %pos4 = tp.position_embedding %wpe : tensor<8x16xf32> -> tensor<4x16xf32>
  %pos = tp.position_embedding %wpe : tensor<8x16xf32> -> tensor<8x16xf32>
  // CHECK: tp.bias_add %[[TOK]], %{{.*}} : tensor<2x8x16xf32>, tensor<8x16xf32>
  %x = tp.bias_add %tok, %pos : tensor<2x8x16xf32>, tensor<8x16xf32>
  // CHECK: tp.layer_norm %{{.*}} {epsilon = 1.000000e-03 : f32} : tensor<2x8x16xf32>, tensor<16xf32>
  %h = tp.layer_norm %x, %w, %b {epsilon = 1.0e-3 : f32} : tensor<2x8x16xf32>, tensor<16xf32>
  // CHECK: tp.residual_layer_norm %{{.*}} : tensor<2x8x16xf32>, tensor<16xf32>
  %sum, %hr = tp.residual_layer_norm %x, %h, %b, %w, %b : tensor<2x8x16xf32>, tensor<16xf32>
  // CHECK: tp.rms_norm %{{.*}} {epsilon = 9.99999997E-7 : f32} : tensor<2x8x16xf32>, tensor<16xf32>
  %rn = tp.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<2x8x16xf32>, tensor<16xf32>
  // CHECK: tp.residual_rms_norm %{{.*}} : tensor<2x8x16xf32>, tensor<16xf32>
  %rsum, %rr = tp.residual_rms_norm %x, %rn, %w : tensor<2x8x16xf32>, tensor<16xf32>
  // CHECK: tp.rms_norm_grad %{{.*}} {epsilon = 9.99999974E-6 : f32} : tensor<2x8x16xf32>, tensor<16xf32> -> tensor<16xf32>
  %rdx, %rdw = tp.rms_norm_grad %x, %w, %rr {epsilon = 1.0e-5 : f32} : tensor<2x8x16xf32>, tensor<16xf32> -> tensor<16xf32>
  // CHECK: tp.swiglu %{{.*}}, %{{.*}} : tensor<2x8x16xf32>
  %sw = tp.swiglu %x, %rn : tensor<2x8x16xf32>
  // CHECK: tp.swiglu_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x16xf32>
  %sdg, %sdu = tp.swiglu_grad %x, %rn, %sw : tensor<2x8x16xf32>
  // CHECK: tp.rope %{{.*}} heads = 4 theta = 1.000000e+04 : tensor<2x8x16xf32>
  %rq = tp.rope %x heads = 4 theta = 1.0e4 : tensor<2x8x16xf32>
  // CHECK: tp.rope %{{.*}}, %{{.*}} heads = 4 theta = 5.000000e+05 {inverse} : tensor<2x8x16xf32>, tensor<2xi32>
  %starts = arith.constant dense<[0, 3]> : tensor<2xi32>
  %rk = tp.rope %x, %starts heads = 4 theta = 5.0e5 {inverse} : tensor<2x8x16xf32>, tensor<2xi32>
  // CHECK: %[[QKV:.*]] = tp.matmul {{.*}} : tensor<2x8x16xf32>, tensor<16x48xf32> -> tensor<2x8x48xf32>
  %qkv = tp.matmul %h, %c_attn : tensor<2x8x16xf32>, tensor<16x48xf32> -> tensor<2x8x48xf32>
  // CHECK: tp.attention %[[QKV]] heads = 4 : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  %a = tp.attention %qkv heads = 4 : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  // CHECK: tp.matmul {{.*}} {transpose_lhs} : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x16x16xf32>
  %at = tp.matmul %a, %a {transpose_lhs} : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x16x16xf32>
  %att = tp.matmul %at, %at {transpose_lhs, transpose_rhs} : tensor<2x16x16xf32>, tensor<2x16x16xf32> -> tensor<2x16x16xf32>
  %p = tp.matmul %a, %c_proj : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
  // CHECK: tp.add
  %r = tp.add %x, %p : tensor<2x8x16xf32>
  // CHECK: tp.gelu
  %g = tp.gelu %r : tensor<2x8x16xf32>
  // CHECK: tp.softmax %{{.*}} dim = 2 : tensor<2x8x16xf32>
  %s = tp.softmax %g dim = 2 : tensor<2x8x16xf32>
  // CHECK: tp.matmul {{.*}} {transpose_rhs} : tensor<2x8x16xf32>, tensor<64x16xf32> -> tensor<2x8x64xf32>
  %logits = tp.matmul %s, %wte {transpose_rhs} : tensor<2x8x16xf32>, tensor<64x16xf32> -> tensor<2x8x64xf32>
  // CHECK: tp.cross_entropy %{{.*}}, %{{.*}} valid_vocab = 50 : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<f32>
  %loss = tp.cross_entropy %logits, %ids valid_vocab = 50 : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: tp.f %{{.*}} over @m["tp"] : tensor<4x8xf32>
  %f = tp.f %x over @m["tp"] : tensor<4x8xf32>
  // CHECK: tp.g %{{.*}} over @m["tp"] {tp.sharding = #tp.sharding<@m, {{\[\[}}], []]>} : tensor<4x8xf32>
  %g = tp.g %f over @m["tp"] {tp.sharding = #tp.sharding<@m, [[], []]>} : tensor<4x8xf32>
  // CHECK: tp.all_reduce max %{{.*}} over @m["tp"] : tensor<4x8xf32>
  %m = tp.all_reduce max %g over @m["tp"] : tensor<4x8xf32>
  // CHECK: tp.all_reduce_bucket sum %{{.*}}, %{{.*}} over @m["dp"] : tensor<4x8xf32>, tensor<4x8xf32>
  %b:2 = tp.all_reduce_bucket sum %m, %g over @m["dp"] : tensor<4x8xf32>, tensor<4x8xf32>
  // CHECK: %[[P:.*]] = tp.all_reduce_start sum %{{.*}}, %{{.*}} over @m["dp"] : tensor<4x8xf32>, tensor<4x8xf32>
  // CHECK: tp.wait %[[P]] : tensor<4x8xf32>, tensor<4x8xf32>
  %started = tp.all_reduce_start sum %m, %g over @m["dp"] : tensor<4x8xf32>, tensor<4x8xf32>
  %w:2 = tp.wait %started : tensor<4x8xf32>, tensor<4x8xf32>
  // CHECK: tp.all_gather %{{.*}} over @m["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x32xf32>
  %ag = tp.all_gather %b#0 over @m["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x32xf32>
  // CHECK: tp.sp_gather %{{.*}} over @m["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x32xf32>
  %spg = tp.sp_gather %b#0 over @m["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x32xf32>
  // CHECK: tp.reduce_scatter sum %{{.*}} over @m["tp"] dim = 1 : tensor<4x32xf32> -> tensor<4x8xf32>
  %rs = tp.reduce_scatter sum %ag over @m["tp"] dim = 1 : tensor<4x32xf32> -> tensor<4x8xf32>
  // CHECK: tp.local_slice %{{.*}} over @m["tp"] dim = 0 : tensor<4x8xf32> -> tensor<1x8xf32>
  %ls = tp.local_slice %rs over @m["tp"] dim = 0 : tensor<4x8xf32> -> tensor<1x8xf32>
  // CHECK: tp.reduce_scatter_bucket sum %{{.*}}, %{{.*}} over @m["tp"] : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<1x8xf32>, tensor<1x8xf32>
  %rsb:2 = tp.reduce_scatter_bucket sum %m, %g over @m["tp"] : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<1x8xf32>, tensor<1x8xf32>
  // CHECK: %[[RS:.*]] = tp.reduce_scatter_start sum %{{.*}} over @m["tp"] : tensor<4x8xf32>
  // CHECK: tp.wait %[[RS]] : tensor<1x8xf32>
  %rs_started = tp.reduce_scatter_start sum %m over @m["tp"] : tensor<4x8xf32>
  %rs_rows = tp.wait %rs_started : tensor<1x8xf32>
  // CHECK: %[[AG:.*]] = tp.all_gather_start %{{.*}} over @m["tp"] : tensor<1x8xf32>
  // CHECK: tp.wait %[[AG]] : tensor<4x8xf32>
  %ag_started = tp.all_gather_start %rs_rows over @m["tp"] : tensor<1x8xf32>
  %ag_whole = tp.wait %ag_started : tensor<4x8xf32>
  // CHECK: #tp.sharding<@m, {{\[\[}}], []], partial = ["tp"]>
  %p = tp.add %rs, %rs {tp.sharding = #tp.sharding<@m, [[], []], partial = ["tp"]>} : tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// Llama's forms: grouped-query attention on separate q, k and v, its
// gradient, and generation's cache of the key/value heads.
// CHECK-LABEL: func.func @grouped_query(
// CHECK: tp.attention %{{.*}}, %{{.*}}, %{{.*}} heads = 4 kv_heads = 2 : tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32> -> tensor<2x8x16xf32>
// CHECK: tp.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads = 4 kv_heads = 2 : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32> -> tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>
// CHECK: tp.kv_cache_store %{{.*}}, %{{.*}}, %{{.*}} layer = 0 heads = 2 : tensor<2x1x8xf32>, tensor<1x2x2x16x4xf32>, tensor<2xi32>
// CHECK: tp.cached_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} layer = 0 heads = 4 kv_heads = 2 : tensor<2x1x16xf32>, tensor<1x2x2x16x4xf32>, tensor<2xi32> -> tensor<2x1x16xf32>
func.func @grouped_query(%q: tensor<2x8x16xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x8xf32>,
                         %q1: tensor<2x1x16xf32>, %k1: tensor<2x1x8xf32>,
                         %cache: tensor<1x2x2x16x4xf32>, %pos: tensor<2xi32>) {
  %a = tp.attention %q, %k, %v heads = 4 kv_heads = 2 : tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32> -> tensor<2x8x16xf32>
  %dq, %dk, %dv = tp.attention_grad %a, %q, %k, %v heads = 4 kv_heads = 2 : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32> -> tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>
  %c = tp.kv_cache_store %k1, %cache, %pos layer = 0 heads = 2 : tensor<2x1x8xf32>, tensor<1x2x2x16x4xf32>, tensor<2xi32>
  %o = tp.cached_attention %q1, %c, %c, %pos layer = 0 heads = 4 kv_heads = 2 : tensor<2x1x16xf32>, tensor<1x2x2x16x4xf32>, tensor<2xi32> -> tensor<2x1x16xf32>
  return
}

// Dropout: as a model writes it, and placed in a global tensor with the
// step's key, as tp-partition and tp-optimizer leave it; attention's
// probability dropout likewise.
// CHECK-LABEL: func.func @dropout
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>, %[[QKV:.*]]: tensor<2x8x48xf32>, %[[HP:.*]]: tensor<8xf32>, %[[B:.*]]: index, %[[T:.*]]: index, %[[S:.*]]: index)
// CHECK: tp.dropout %[[X]] dropout = 1.000000e-01 stream = %[[S]] : tensor<2x8x16xf32>
// CHECK: tp.dropout %[[X]] dropout = 1.000000e-01 stream = %[[S]] at [%[[B]], %[[T]], %{{.*}}] of [4, 16, 16] key(%[[HP]] : tensor<8xf32>) : tensor<2x8x16xf32>
// CHECK: tp.attention %[[QKV]] heads = 4 dropout = 2.500000e-01 stream = %[[S]] : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
// CHECK: tp.attention_grad %[[X]], %[[QKV]] heads = 4 dropout = 2.500000e-01 stream = %[[S]] at [%[[B]], %{{.*}}] of [4, 4] key(%[[HP]] : tensor<8xf32>) : tensor<2x8x16xf32>, tensor<2x8x48xf32> -> tensor<2x8x48xf32>
func.func @dropout(%x: tensor<2x8x16xf32>, %qkv: tensor<2x8x48xf32>, %hp: tensor<8xf32>, %b: index, %t: index, %s: index) {
  %c0 = arith.constant 0 : index
  %0 = tp.dropout %x dropout = 0.1 stream = %s : tensor<2x8x16xf32>
  %1 = tp.dropout %x dropout = 0.1 stream = %s at [%b, %t, %c0] of [4, 16, 16] key(%hp : tensor<8xf32>) : tensor<2x8x16xf32>
  %2 = tp.attention %qkv heads = 4 dropout = 0.25 stream = %s : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  %3 = tp.attention_grad %x, %qkv heads = 4 dropout = 0.25 stream = %s at [%b, %c0] of [4, 4] key(%hp : tensor<8xf32>) : tensor<2x8x16xf32>, tensor<2x8x48xf32> -> tensor<2x8x48xf32>
  return
}
