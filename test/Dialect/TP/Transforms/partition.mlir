// RUN: megatron-opt %s -split-input-file -verify-diagnostics -tp-propagate -tp-insert-conjugates -tp-partition | FileCheck %s

// The MLP at local shapes: A by columns, B by rows, one all-reduce (g).

// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x16xf32> {tp.global_shape = array<i64: 8, 16>
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<16x16xf32> {tp.global_shape = array<i64: 16, 64>, tp.sharding = #tp.sharding<@m, {{\[\[}}], ["tp"]]>}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<16x16xf32> {tp.global_shape = array<i64: 64, 16>, tp.sharding = #tp.sharding<@m, {{\[}}["tp"], []]>}
// CHECK-SAME: -> tensor<8x16xf32>
// CHECK: %[[F:.*]] = tp.f %[[X]] over @m["tp"] : tensor<8x16xf32>
// CHECK: %[[H:.*]] = tp.matmul %[[F]], %[[A]] : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
// CHECK: %[[GL:.*]] = tp.gelu %[[H]] : tensor<8x16xf32>
// CHECK: %[[Y:.*]] = tp.matmul %[[GL]], %[[B]] : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
// CHECK: %[[G:.*]] = tp.g %[[Y]] over @m["tp"] : tensor<8x16xf32>
// CHECK: return %[[G]]
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

// Each rank keeps whole heads of q, k and v: 4 heads over 2 ranks is 2 heads
// of a [2, 4, 12] local qkv.

// CHECK-LABEL: func.func @attention(
// CHECK: tp.attention %{{.*}} heads = 2 : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
tp.mesh @m axes = ["tp" = 2]
func.func @attention(%x: tensor<2x4x8xf32>,
                     %w: tensor<8x24xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]], sections = [1, 3]>}) -> tensor<2x4x8xf32> {
  %qkv = tp.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x24xf32> -> tensor<2x4x24xf32>
  %a = tp.attention %qkv heads = 4 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %r = tp.reshard %a {tp.sharding = #tp.sharding<@m, [[], [], []]>} : tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}

// -----

// Grouped-query attention on separate q, k and v: each rank keeps 4 of the
// 8 query heads and 1 of the 2 key/value heads (a whole group), and rotates
// its own heads.

// CHECK-LABEL: func.func @grouped_attention(
// CHECK: tp.rope %{{.*}} heads = 4 theta = 1.000000e+04 : tensor<2x4x16xf32>
// CHECK: tp.rope %{{.*}} heads = 1 theta = 1.000000e+04 : tensor<2x4x4xf32>
// CHECK: tp.attention %{{.*}}, %{{.*}}, %{{.*}} heads = 4 kv_heads = 1 : tensor<2x4x16xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x16xf32>
tp.mesh @m axes = ["tp" = 2]
func.func @grouped_attention(%x: tensor<2x4x32xf32>,
    %wq: tensor<32x32xf32> {tp.sharding = #tp.sharding<@m, [["tp"], []]>},
    %wk: tensor<8x32xf32> {tp.sharding = #tp.sharding<@m, [["tp"], []]>},
    %wv: tensor<8x32xf32> {tp.sharding = #tp.sharding<@m, [["tp"], []]>}) -> tensor<2x4x32xf32> {
  %q = tp.matmul %x, %wq {transpose_rhs} : tensor<2x4x32xf32>, tensor<32x32xf32> -> tensor<2x4x32xf32>
  %k = tp.matmul %x, %wk {transpose_rhs} : tensor<2x4x32xf32>, tensor<8x32xf32> -> tensor<2x4x8xf32>
  %v = tp.matmul %x, %wv {transpose_rhs} : tensor<2x4x32xf32>, tensor<8x32xf32> -> tensor<2x4x8xf32>
  %rq = tp.rope %q heads = 8 theta = 1.0e4 : tensor<2x4x32xf32>
  %rk = tp.rope %k heads = 2 theta = 1.0e4 : tensor<2x4x8xf32>
  %a = tp.attention %rq, %rk, %v heads = 8 kv_heads = 2 : tensor<2x4x32xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x32xf32>
  %r = tp.reshard %a {tp.sharding = #tp.sharding<@m, [[], [], []]>} : tensor<2x4x32xf32>
  return %r : tensor<2x4x32xf32>
}

// -----

// More ranks than key/value heads: of the 8 query heads each of 4 ranks
// keeps 2, and the one key/value head they read (each of the 2 heads on 2
// ranks: its projection's columns split over "tp_kv").

// CHECK-LABEL: func.func @grouped_attention_more_ranks(
// CHECK-SAME: tensor<32x8xf32> {tp.global_shape = array<i64: 32, 32>
// CHECK-SAME: tensor<32x4xf32> {tp.global_shape = array<i64: 32, 8>
// CHECK: tp.rope %{{.*}} heads = 2 theta = 1.000000e+04 : tensor<2x4x8xf32>
// CHECK: tp.rope %{{.*}} heads = 1 theta = 1.000000e+04 : tensor<2x4x4xf32>
// CHECK: tp.attention %{{.*}}, %{{.*}}, %{{.*}} heads = 2 kv_heads = 1 : tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x8xf32>
tp.mesh @m axes = ["tp" = 4 ["tp_kv" = 2, "tp_rep" = 2]]
func.func @grouped_attention_more_ranks(%x: tensor<2x4x32xf32>,
    %wq: tensor<32x32xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
    %wk: tensor<32x8xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp_kv"]]>}) -> tensor<2x4x32xf32> {
  %q = tp.matmul %x, %wq : tensor<2x4x32xf32>, tensor<32x32xf32> -> tensor<2x4x32xf32>
  %k = tp.matmul %x, %wk : tensor<2x4x32xf32>, tensor<32x8xf32> -> tensor<2x4x8xf32>
  %rq = tp.rope %q heads = 8 theta = 1.0e4 : tensor<2x4x32xf32>
  %rk = tp.rope %k heads = 2 theta = 1.0e4 : tensor<2x4x8xf32>
  %a = tp.attention %rq, %rk, %k heads = 8 kv_heads = 2 : tensor<2x4x32xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x32xf32>
  %r = tp.reshard %a {tp.sharding = #tp.sharding<@m, [[], [], []]>} : tensor<2x4x32xf32>
  return %r : tensor<2x4x32xf32>
}

// -----

// Vocabulary parallelism: the embedding masks ids outside this rank's rows
// and g sums the ranks; the loss all-reduces only per-token statistics.

// CHECK-LABEL: func.func @vocab(
// CHECK-SAME: %[[WTE:[a-z0-9]+]]: tensor<8x4xf32>
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<2x3xi32>
// CHECK: %[[RANK:.*]] = tp.axis_index @m["tp"]
// CHECK: %[[ROWS:.*]] = arith.constant 8 : index
// CHECK: %[[START:.*]] = arith.muli %[[RANK]], %[[ROWS]]
// CHECK: %[[E:.*]] = tp.embedding %[[WTE]][%[[IDS]]] offset %[[START]] : tensor<8x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
// CHECK: %[[X:.*]] = tp.g %[[E]]
// CHECK: %[[XF:.*]] = tp.f %[[X]]
// CHECK: %[[LOGITS:.*]] = tp.matmul %[[XF]], %[[WTE]] {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
// CHECK: %[[OFF:.*]] = arith.muli
// CHECK: %[[LMAX:.*]] = tp.xent_max %[[LOGITS]] offset %[[OFF]] valid_vocab = 30 : tensor<2x3x8xf32> -> tensor<2x3xf32>
// CHECK: %[[MAX:.*]] = tp.all_reduce max %[[LMAX]] over @m["tp"]
// CHECK: %[[SUMEXP:.*]], %[[TARGET:.*]] = tp.xent_sum_exp %[[LOGITS]], %[[MAX]], %[[IDS]] offset %[[OFF]] valid_vocab = 30
// CHECK: %[[SE:.*]] = tp.all_reduce sum %[[SUMEXP]]
// CHECK: %[[TL:.*]] = tp.all_reduce sum %[[TARGET]]
// CHECK: %[[LOSS:.*]] = tp.xent_loss %[[SE]], %[[MAX]], %[[TL]] : tensor<2x3xf32> -> tensor<f32>
// CHECK: return %[[LOSS]]
tp.mesh @m axes = ["tp" = 4]
func.func @vocab(%wte: tensor<32x4xf32> {tp.sharding = #tp.sharding<@m, [["tp"], []]>},
                 %ids: tensor<2x3xi32>) -> tensor<f32> {
  %x = tp.embedding %wte[%ids] : tensor<32x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  %l = tp.matmul %x, %wte {transpose_rhs} : tensor<2x3x4xf32>, tensor<32x4xf32> -> tensor<2x3x32xf32>
  %loss = tp.cross_entropy %l, %ids valid_vocab = 30 : tensor<2x3x32xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Reshards move data: a replicated weight is sliced locally (once, right
// after it is defined, for every use that needs the slice), a split
// activation that must be whole is gathered.

// CHECK-LABEL: func.func @reshards(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x16xf32>
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<64x16xf32>
// CHECK: %[[BS:.*]] = tp.local_slice %[[B]] over @m["tp"] dim = 0 : tensor<64x16xf32> -> tensor<32x16xf32>
// CHECK: %[[H:.*]] = tp.matmul
// CHECK: tp.matmul %[[H]], %[[BS]] : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
// CHECK: %[[HG:.*]] = tp.all_gather %[[H]] over @m["tp"] dim = 1 : tensor<8x32xf32> -> tensor<8x64xf32>
// CHECK: tp.gelu %[[HG]] : tensor<8x64xf32>
tp.mesh @m axes = ["tp" = 2]
func.func @reshards(%x: tensor<8x16xf32>,
                    %a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
                    %b: tensor<64x16xf32> {tp.sharding = #tp.sharding<@m, [[], []]>}) -> (tensor<8x16xf32>, tensor<8x64xf32>) {
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  // expected-remark @+1 {{conflicting shardings of factor #2: kept ["tp"] over []; tensors that disagree are resharded}}
  %y = tp.matmul %h, %b : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32>
  %whole = tp.reshard %h {tp.sharding = #tp.sharding<@m, [[], []]>} : tensor<8x64xf32>
  %act = tp.gelu %whole : tensor<8x64xf32>
  return %y, %act : tensor<8x16xf32>, tensor<8x64xf32>
}

// -----

// Sections (the q, k and v thirds of a fused weight) each split over the
// ranks cannot be gathered back by one all-gather.

tp.mesh @m axes = ["tp" = 2]
func.func @sections(%w: tensor<8x24xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]], sections = [1, 3]>}) -> tensor<8x24xf32> {
  %g = tp.gelu %w : tensor<8x24xf32>
  // expected-error @+1 {{'tp.reshard' op cannot reshard a dimension split into sections}}
  %r = tp.reshard %g {tp.sharding = #tp.sharding<@m, [[], []]>} : tensor<8x24xf32>
  return %r : tensor<8x24xf32>
}

// -----

// A dropout already placed in a global tensor is a per-rank op: partitioning
// it again would place it twice.

tp.mesh @m axes = ["tp" = 2]
func.func @placed_dropout(%x: tensor<4x8xf32> {tp.sharding = #tp.sharding<@m, [["tp"], []]>}, %s: index, %i: index) -> tensor<4x8xf32> {
  // expected-error @+1 {{'tp.dropout' op is partitioned already: it has offsets}}
  %y = tp.dropout %x dropout = 0.1 stream = %s at [%i, %i] of [4, 8] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

tp.mesh @m axes = ["tp" = 2]
func.func @placed_attention(%qkv: tensor<2x4x24xf32> {tp.sharding = #tp.sharding<@m, [[], [], ["tp"]], sections = [1, 1, 3]>}, %s: index, %i: index) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'tp.attention' op is partitioned already: its dropout has offsets}}
  %a = tp.attention %qkv heads = 4 dropout = 0.1 stream = %s at [%i, %i] of [2, 4] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  return %a : tensor<2x4x8xf32>
}
