// RUN: megatron-opt %s -split-input-file -tp-megatron-annotate=tp=2 -verify-diagnostics | FileCheck %s
// RUN: not megatron-opt %s -split-input-file -tp-megatron-annotate=tp=0 2>&1 | FileCheck %s --check-prefix=TP0
// TP0: error: tp, dp and micro-batches must be positive, got tp=0, dp=1 and micro-batches=1
// RUN: gpt2-mlir --preset=tiny --layers=1 | not megatron-opt -tp-megatron-annotate=tp=4611686018427387904 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: error: {{.*}}cannot pad the vocabulary of 512 rows to a multiple of 128 x tp=4611686018427387904: the size overflows 64 bits

// One GPT-2 block: QKV and MLP-up split by columns (QKV per q/k/v section),
// their consumers' GEMMs by rows, the embedding by vocabulary rows, the rest
// replicated.

// CHECK: tp.mesh @mesh axes = ["tp" = 2]
// CHECK-LABEL: func.func @block(
// CHECK-SAME: %[[WTE:[a-z0-9]+]]: tensor<16x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>}
// CHECK-SAME: %[[LNW:[a-z0-9]+]]: tensor<8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[\[}}]]>}
// CHECK-SAME: tensor<8x24xf32> {tp.sharding = #tp.sharding<@mesh, {{\[\[}}], ["tp"]], sections = [1, 3]>}
// CHECK-SAME: tensor<24xf32> {tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"]], sections = [3]>}
// CHECK-SAME: tensor<8x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>}
// CHECK-SAME: %[[PROJB:[a-z0-9]+]]: tensor<8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[\[}}]]>}
// CHECK-SAME: tensor<8x32xf32> {tp.sharding = #tp.sharding<@mesh, {{\[\[}}], ["tp"]]>}
// CHECK-SAME: tensor<32xf32> {tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"]]>}
// CHECK-SAME: tensor<32x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>}
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<2x4xi32>)
func.func @block(%wte: tensor<16x8xf32>, %lnw: tensor<8xf32>,
                 %c_attn: tensor<8x24xf32>, %c_attn_b: tensor<24xf32>,
                 %c_proj: tensor<8x8xf32>, %c_proj_b: tensor<8xf32>,
                 %c_fc: tensor<8x32xf32>, %c_fc_b: tensor<32xf32>,
                 %mlp_proj: tensor<32x8xf32>, %ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %x = tp.embedding %wte[%ids] : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %h = tp.layer_norm %x, %lnw, %lnw : tensor<2x4x8xf32>, tensor<8xf32>
  %qkv = tp.matmul %h, %c_attn : tensor<2x4x8xf32>, tensor<8x24xf32> -> tensor<2x4x24xf32>
  %qkvb = tp.bias_add %qkv, %c_attn_b : tensor<2x4x24xf32>, tensor<24xf32>
  %a = tp.attention %qkvb heads = 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %p = tp.matmul %a, %c_proj : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %pb = tp.bias_add %p, %c_proj_b : tensor<2x4x8xf32>, tensor<8xf32>
  %fc = tp.matmul %pb, %c_fc : tensor<2x4x8xf32>, tensor<8x32xf32> -> tensor<2x4x32xf32>
  %fcb = tp.bias_add %fc, %c_fc_b : tensor<2x4x32xf32>, tensor<32xf32>
  %g = tp.gelu %fcb : tensor<2x4x32xf32>
  %y = tp.matmul %g, %mlp_proj : tensor<2x4x32xf32>, tensor<32x8xf32> -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// A vocabulary that TP does not divide is padded to a multiple of 128 * TP;
// the tied LM head's logits grow, the loss keeps valid_vocab.

// CHECK-LABEL: func.func @padded_vocab(
// CHECK-SAME: %{{.*}}: tensor<256x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>, tp.unpadded_shape = array<i64: 15, 8>}
// CHECK: tp.matmul {{.*}} -> tensor<2x4x256xf32>
// CHECK: tp.cross_entropy {{.*}} valid_vocab = 15 : tensor<2x4x256xf32>
func.func @padded_vocab(%wte: tensor<15x8xf32>, %ids: tensor<2x4xi32>) -> tensor<f32> {
  %x = tp.embedding %wte[%ids] : tensor<15x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %l = tp.matmul %x, %wte {transpose_rhs} : tensor<2x4x8xf32>, tensor<15x8xf32> -> tensor<2x4x15xf32>
  %loss = tp.cross_entropy %l, %ids valid_vocab = 15 : tensor<2x4x15xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A user annotation is kept as given.
// CHECK-LABEL: func.func @user_annotation(
// CHECK-SAME: tensor<8x32xf32> {tp.sharding = #tp.sharding<@mesh, {{\[\[}}], []]>}
tp.mesh @mesh axes = ["tp" = 2]
func.func @user_annotation(%x: tensor<2x8xf32>, %w: tensor<8x32xf32> {tp.sharding = #tp.sharding<@mesh, [[], []]>}) -> tensor<2x32xf32> {
  %h = tp.matmul %x, %w : tensor<2x8xf32>, tensor<8x32xf32> -> tensor<2x32xf32>
  %g = tp.gelu %h : tensor<2x32xf32>
  return %g : tensor<2x32xf32>
}

// -----

func.func @heads(%qkv: tensor<2x4x24xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{tensor-parallel size 2 does not divide the 1 attention heads}}
  %a = tp.attention %qkv heads = 1 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  return %a : tensor<2x4x8xf32>
}

// -----

func.func @width(%x: tensor<2x8xf32>, %w: tensor<8x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{dimension 1 of size 3 cannot be split into 2 shards}}
  %h = tp.matmul %x, %w : tensor<2x8xf32>, tensor<8x3xf32> -> tensor<2x3xf32>
  %g = tp.gelu %h : tensor<2x3xf32>
  return %g : tensor<2x3xf32>
}

// -----

// Padding the table grows every use; logits that leave the function instead
// of feeding the loss would expose the padded rows.

func.func @pad_escapes(%wte: tensor<15x8xf32>, %ids: tensor<2x4xi32>) -> tensor<2x4x15xf32> {
  %x = tp.embedding %wte[%ids] : tensor<15x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  // expected-error @+1 {{cannot pad the vocabulary from 15 to 256 rows: the table is used other than by the embedding and an LM head feeding the loss}}
  %l = tp.matmul %x, %wte {transpose_rhs} : tensor<2x4x8xf32>, tensor<15x8xf32> -> tensor<2x4x15xf32>
  return %l : tensor<2x4x15xf32>
}

// -----

// expected-error @+1 {{mesh @mesh exists with another "tp" size than tp=2}}
tp.mesh @mesh axes = ["tp" = 4]
func.func @other_mesh(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  return %x : tensor<2x8xf32>
}

// -----

// expected-error @+1 {{mesh @mesh exists without a "tp" axis}}
tp.mesh @mesh axes = ["dp" = 2]
func.func @no_tp_axis(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  return %x : tensor<2x8xf32>
}

// -----

// A Llama block's GEMMs (nn.Linear [out, in] weights, transposed): q and k
// through rotary embeddings, v, and SwiGLU's gate and up split by columns
// (the weights' rows), o and down by rows (their columns).

// CHECK-LABEL: func.func @llama_block(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<8x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>}
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<8x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>}
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<8x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>}
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<8x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[\[}}], ["tp"]]>}
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<32x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>}
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<32x8xf32> {tp.sharding = #tp.sharding<@mesh, {{\[}}["tp"], []]>}
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<8x32xf32> {tp.sharding = #tp.sharding<@mesh, {{\[\[}}], ["tp"]]>}
func.func @llama_block(%x: tensor<2x4x8xf32>, %wq: tensor<8x8xf32>, %wk: tensor<8x8xf32>,
                       %wv: tensor<8x8xf32>, %wo: tensor<8x8xf32>,
                       %wg: tensor<32x8xf32>, %wu: tensor<32x8xf32>,
                       %wd: tensor<8x32xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %q = tp.matmul %x, %wq {transpose_rhs} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %k = tp.matmul %x, %wk {transpose_rhs} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %v = tp.matmul %x, %wv {transpose_rhs} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %rq = tp.rope %q heads = 2 theta = 1.0e4 : tensor<2x4x8xf32>
  %rk = tp.rope %k heads = 2 theta = 1.0e4 : tensor<2x4x8xf32>
  %at = tp.attention %rq, %rk, %v heads = 2 kv_heads = 2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %o = tp.matmul %at, %wo {transpose_rhs} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %g = tp.matmul %x, %wg {transpose_rhs} : tensor<2x4x8xf32>, tensor<32x8xf32> -> tensor<2x4x32xf32>
  %u = tp.matmul %x, %wu {transpose_rhs} : tensor<2x4x8xf32>, tensor<32x8xf32> -> tensor<2x4x32xf32>
  %a = tp.swiglu %g, %u : tensor<2x4x32xf32>
  %y = tp.matmul %a, %wd {transpose_rhs} : tensor<2x4x32xf32>, tensor<8x32xf32> -> tensor<2x4x8xf32>
  return %o, %y : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

func.func @rope_heads_tp(%x: tensor<2x4x12xf32>, %w: tensor<12x12xf32>) -> tensor<2x4x12xf32> {
  %q = tp.matmul %x, %w : tensor<2x4x12xf32>, tensor<12x12xf32> -> tensor<2x4x12xf32>
  // expected-error @+1 {{tensor-parallel size 2 neither divides the 3 attention heads nor is a multiple of them}}
  %r = tp.rope %q heads = 3 theta = 1.0e4 : tensor<2x4x12xf32>
  return %r : tensor<2x4x12xf32>
}

// -----

// Grouped-query attention splits whole key/value heads too, or each over
// the ranks sharing it (megatron-annotate-gqa.mlir): tp must divide them or
// be a multiple of them.
func.func @kv_heads_tp(%q: tensor<2x4x12xf32>, %k: tensor<2x4x6xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{tensor-parallel size 2 neither divides the 3 key/value heads nor is a multiple of them}}
  %a = tp.attention %q, %k, %k heads = 6 kv_heads = 3 : tensor<2x4x12xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x12xf32>
  return %a : tensor<2x4x12xf32>
}
