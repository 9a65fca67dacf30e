// RUN: megatron-opt %s -split-input-file -convert-tp-to-runtime -cse -verify-diagnostics | FileCheck %s

// A GEMM against a weight is one runtime GEMM over the folded batch rows;
// the kernel writes a fresh buffer that returns to the tensor program.

// CHECK-LABEL: func.func private @gemm(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr, %[[X:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<5x4xf32>) -> tensor<2x3x5xf32>
// CHECK-DAG: %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<2x3x4xf32> to memref<2x3x4xf32, strided<[12, 4, 1], offset: ?>>
// CHECK-DAG: %[[XF:.*]] = memref.collapse_shape %[[XB]] {{\[\[}}0, 1, 2]] : memref<2x3x4xf32, strided<[12, 4, 1], offset: ?>> into memref<24xf32, strided<[1], offset: ?>>
// CHECK-DAG: %[[XC:.*]] = memref.cast %[[XF]] : memref<24xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
// CHECK-DAG: %[[OUT:.*]] = memref.alloc() : memref<2x3x5xf32>
// CHECK-DAG: %[[TRUE:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[M:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 4 : i64
// CHECK: call @mrt_gemm_f32(%{{.*}}, %[[TRUE]], %[[M]], %[[N]], %[[K]], %{{.*}}, %[[XC]], %[[K]], %{{.*}}, %[[K]], %{{.*}}, %{{.*}}, %[[N]])
// CHECK: %[[Y:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: return %[[Y]]
// CHECK: func.func private @mrt_gemm_f32(i32, i32, i64, i64, i64, f32, memref<?xf32, strided<[1], offset: ?>>, i64, memref<?xf32, strided<[1], offset: ?>>, i64, f32, memref<?xf32, strided<[1], offset: ?>>, i64)
func.func @gemm(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>) -> tensor<2x3x5xf32> {
  %y = tp.matmul %x, %w {transpose_rhs} : tensor<2x3x4xf32>, tensor<5x4xf32> -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// Elementwise ops are linalg on tensors: the bias broadcasts over the
// leading dimensions, GELU is GPT-2's tanh form.

// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func private @bias_gelu(
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.addf
// CHECK: linalg.generic
// CHECK: math.tanh
func.func @bias_gelu(%x: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  %y = tp.bias_add %x, %b : tensor<3x4xf32>, tensor<4xf32>
  %z = tp.gelu %y : tensor<3x4xf32>
  return %z : tensor<3x4xf32>
}

// -----

// g all-reduces a copy on the tp communicator; f is the identity forward.

// CHECK-LABEL: func.func private @conjugates(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr, %[[X:.*]]: tensor<2x4xf32>
// CHECK-NOT: tp.f
// CHECK: %[[COPY:.*]] = memref.alloc() : memref<2x4xf32>
// CHECK: memref.copy %{{.*}}, %[[COPY]]
// CHECK: call @mrt_all_reduce_f32(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, i32, memref<?xf32, strided<[1], offset: ?>>, i64, i32) -> ()
tp.mesh @m axes = ["tp" = 2]
func.func @conjugates(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %f = tp.f %x over @m["tp"] : tensor<2x4xf32>
  %g = tp.g %f over @m["tp"] : tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

// Unsplit cross-entropy is the vocabulary-parallel recipe on one rank; the
// scalar loss leaves the function as an f32.

// CHECK-LABEL: func.func private @loss(
// CHECK-SAME: -> f32
// CHECK: call @mrt_vocab_ce_local_max_f32
// CHECK: call @mrt_vocab_ce_local_sumexp_f32
// CHECK: %[[L:.*]] = call @mrt_vocab_ce_loss_f32
// CHECK: %[[T:.*]] = tensor.from_elements %[[L]] : tensor<f32>
// CHECK: %[[S:.*]] = tensor.extract %[[T]][] : tensor<f32>
// CHECK: return %[[S]] : f32
func.func @loss(%logits: tensor<2x3x8xf32>, %t: tensor<2x3xi32>) -> tensor<f32> {
  %l = tp.cross_entropy %logits, %t valid_vocab = 7 : tensor<2x3x8xf32>, tensor<2x3xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The embedding's vocabulary offset comes from the rank along tp.

// CHECK-LABEL: func.func private @embedding(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr
// CHECK: %[[RANK:.*]] = call @mrt_axis_rank(%[[CTX]], %{{.*}}) : (!llvm.ptr, i32) -> i64
// CHECK: %[[IDX:.*]] = arith.index_cast %[[RANK]] : i64 to index
// CHECK: %[[START:.*]] = arith.muli %[[IDX]]
// CHECK: %[[START64:.*]] = arith.index_cast %[[START]] : index to i64
// CHECK: call @mrt_embedding_fwd_f32(%{{.*}}, %{{.*}}, %[[START64]],
tp.mesh @m axes = ["tp" = 2]
func.func @embedding(%table: tensor<8x4xf32>, %ids: tensor<2x3xi32>) -> tensor<2x3x4xf32> {
  %r = tp.axis_index @m["tp"]
  %c8 = arith.constant 8 : index
  %start = arith.muli %r, %c8 : index
  %e = tp.embedding %table[%ids] offset %start : tensor<8x4xf32>, tensor<2x3xi32> -> tensor<2x3x4xf32>
  return %e : tensor<2x3x4xf32>
}

// -----

// A tied table's gradient, the LM head's %g plus the embedding's: the
// kernel adds the embedding's rows into %g's buffer; no zeroed table, no
// add of two tables.
// CHECK-LABEL: func.func private @tied_table_grad(
// CHECK-SAME:    %{{.*}}: !llvm.ptr, %[[DY:.*]]: tensor<2x3x4xf32>, %[[IDS:.*]]: tensor<2x3xi32>, %[[G:.*]]: tensor<8x4xf32>)
// CHECK-NOT:     linalg.
// CHECK:         %[[SUM:.*]] = bufferization.to_buffer %[[G]] : tensor<8x4xf32> to memref<8x4xf32, strided<[4, 1], offset: ?>>
// CHECK:         %[[FLAT:.*]] = memref.collapse_shape %[[SUM]]
// CHECK:         %[[VIEW:.*]] = memref.cast %[[FLAT]]
// CHECK:         call @mrt_embedding_bwd_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[VIEW]])
// CHECK-NOT:     linalg.
// CHECK:         %[[R:.*]] = bufferization.to_tensor %[[SUM]]
// CHECK:         return %[[R]]
func.func @tied_table_grad(%dy: tensor<2x3x4xf32>, %ids: tensor<2x3xi32>, %g: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %e = tp.embedding_grad %dy[%ids] : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<8x4xf32>
  %s = tp.add %g, %e : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// %g is read again after the sum: the embedding's gradient gets a zeroed
// table of its own, and the two are added.
// CHECK-LABEL: func.func private @table_grad_read_again(
// CHECK:         linalg.fill
// CHECK:         call @mrt_embedding_bwd_f32(
// CHECK:         linalg.generic
func.func @table_grad_read_again(%dy: tensor<2x3x4xf32>, %ids: tensor<2x3xi32>, %g: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %e = tp.embedding_grad %dy[%ids] : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<8x4xf32>
  %s = tp.add %g, %e : tensor<8x4xf32>
  return %s, %g : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

func.func @batched_rhs(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  // expected-error @+1 {{'tp.matmul' op with a batched rhs has no runtime lowering; only [K, N] weights}}
  %y = tp.matmul %a, %b : tensor<2x3x4xf32>, tensor<2x4x5xf32> -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

tp.mesh @m axes = ["pp" = 2]
func.func @unknown_axis(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{mesh axis "pp" has no runtime communicator (only "dp", "tp" and sub-axes of "tp")}}
  %g = tp.g %x over @m["pp"] : tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

func.func @transpose_lhs_batched(%a: tensor<2x4x3xf32>, %w: tensor<4x5xf32>) -> tensor<2x3x5xf32> {
  // expected-error @+1 {{'tp.matmul' op with transpose_lhs and batch dimensions has no runtime lowering}}
  %y = tp.matmul %a, %w {transpose_lhs} : tensor<2x4x3xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// Gathering along an inner dimension: the ranks' chunks come stacked
// ([ranks, outer, inner]), and a transpose puts each at its columns.

// CHECK-LABEL: func.func private @gather_inner(
// CHECK: %[[STACKED:.+]] = memref.alloc() : memref<4x4x8xf32>
// CHECK: call @mrt_all_gather_f32(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) : (!llvm.ptr, i32, memref<?xf32, strided<[1], offset: ?>>, memref<?xf32, strided<[1], offset: ?>>, i64) -> ()
// CHECK: %[[CHUNKS:.+]] = bufferization.to_tensor %[[STACKED]]
// CHECK: %[[PLACED:.+]] = linalg.transpose ins(%[[CHUNKS]] : tensor<4x4x8xf32>) outs(%{{.+}} : tensor<4x4x8xf32>) permutation = [1, 0, 2]
// CHECK: %[[FLAT:.+]] = tensor.collapse_shape %[[PLACED]] {{\[\[}}0, 1, 2]] : tensor<4x4x8xf32> into tensor<128xf32>
// CHECK: %[[G:.+]] = tensor.expand_shape %[[FLAT]] {{\[\[}}0, 1]] output_shape [4, 32] : tensor<128xf32> into tensor<4x32xf32>
// CHECK: return %[[G]]
tp.mesh @m axes = ["tp" = 4]
func.func @gather_inner(%x: tensor<4x8xf32>) -> tensor<4x32xf32> {
  %g = tp.all_gather %x over @m["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x32xf32>
  return %g : tensor<4x32xf32>
}

// -----

// Reduce-scattering along an inner dimension (sequence parallelism's
// sequence): a transpose puts each rank's columns first, as the runtime
// scatters by leading chunks.

// CHECK-LABEL: func.func private @scatter_inner(
// CHECK: %[[FLAT:.+]] = tensor.collapse_shape %{{.+}} {{\[\[}}0, 1]] : tensor<4x32xf32> into tensor<128xf32>
// CHECK: %[[CHUNKS:.+]] = tensor.expand_shape %[[FLAT]] {{\[\[}}0, 1, 2]] output_shape [4, 4, 8] : tensor<128xf32> into tensor<4x4x8xf32>
// CHECK: %[[BYRANK:.+]] = linalg.transpose ins(%[[CHUNKS]] : tensor<4x4x8xf32>) outs(%{{.+}} : tensor<4x4x8xf32>) permutation = [1, 0, 2]
// CHECK: bufferization.to_buffer %[[BYRANK]]
// CHECK: call @mrt_reduce_scatter_f32(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) : (!llvm.ptr, i32, memref<?xf32, strided<[1], offset: ?>>, memref<?xf32, strided<[1], offset: ?>>, i64) -> ()
tp.mesh @m axes = ["tp" = 4]
func.func @scatter_inner(%x: tensor<4x32xf32>) -> tensor<4x8xf32> {
  %s = tp.reduce_scatter sum %x over @m["tp"] dim = 1 : tensor<4x32xf32> -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

tp.mesh @m axes = ["tp" = 4]
func.func @scatter_max(%x: tensor<32x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'tp.reduce_scatter' op has no runtime lowering for a max reduction}}
  %s = tp.reduce_scatter max %x over @m["tp"] dim = 0 : tensor<32x4xf32> -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func @reshard(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'tp.reshard' op has no runtime lowering: the partitioned program holds only ops the runtime runs}}
  %s = tp.reshard %x : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Softmax is a chain of linalg reductions and elementwise ops: the row max,
// exp(x - max), the row sum, the quotient.
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-LABEL: func.func private @softmax(
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MAXINIT:.*]] = linalg.fill ins(%[[NEGINF]] : f32) outs(%{{.*}} : tensor<4x1xf32>)
// CHECK: %[[MAX:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} {{.*}} outs(%[[MAXINIT]] : tensor<4x1xf32>)
// CHECK: arith.maximumf
// CHECK: %[[EXP:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %[[MAX]] :
// CHECK: math.exp
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[EXP]]
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[EXP]], %[[SUM]] :
// CHECK: arith.divf
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = tp.softmax %x dim = 1 : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// A bias gradient sums every token row into the bias: one runtime reduction
// over a [rows, cols] view.

// CHECK-LABEL: func.func private @bias_grad(
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[COLS:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[OUT:.*]] = memref.alloc() : memref<5xf32>
// CHECK: call @mrt_sum_rows_f32(%{{.*}}, %[[ROWS]], %[[COLS]], %{{.*}})
// CHECK: bufferization.to_tensor %[[OUT]]
func.func @bias_grad(%dy: tensor<2x3x5xf32>) -> tensor<5xf32> {
  %db = tp.sum_to %dy : tensor<2x3x5xf32> -> tensor<5xf32>
  return %db : tensor<5xf32>
}

// -----

// A one-element all-reduce of a host scalar (the squared gradient norm)
// passes the scalar itself: no buffer for the host to write.

// CHECK-LABEL: func.func private @scalar_all_reduce(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr, %[[S:.*]]: f32)
// CHECK: %[[R:.*]] = call @mrt_all_reduce_scalar_f32(%[[CTX]], %{{.*}}, %[[S]], %{{.*}}) : (!llvm.ptr, i32, f32, i32) -> f32
// CHECK: tensor.from_elements %[[R]]
tp.mesh @mesh axes = ["tp" = 2]
func.func @scalar_all_reduce(%s: f32) -> tensor<1xf32> {
  %t = tensor.from_elements %s : tensor<1xf32>
  %r = tp.all_reduce sum %t over @mesh["tp"] : tensor<1xf32>
  return %r : tensor<1xf32>
}

// -----

// A residual connection and the norm of its sum (tp-fuse-residual-norm):
// one runtime pass writes the sum (still used: the next residual) and the
// norm.

// CHECK-LABEL: func.func private @residual_norm(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr, %[[X:.*]]: tensor<2x3x4xf32>, %[[H:.*]]: tensor<2x3x4xf32>, %[[B:.*]]: tensor<4xf32>, %[[W:.*]]: tensor<4xf32>, %[[BETA:.*]]: tensor<4xf32>)
// CHECK-DAG: %[[SUM:.*]] = memref.alloc() : memref<2x3x4xf32>
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[COLS:.*]] = arith.constant 4 : i64
// CHECK: call @mrt_residual_layernorm_fwd_f32({{.*}}, %[[ROWS]], %[[COLS]], %{{.*}})
// CHECK-NOT: linalg.generic
// CHECK-NOT: mrt_layernorm_fwd_f32
// CHECK: %[[S:.*]] = bufferization.to_tensor %[[SUM]]
// CHECK: return %[[S]], %{{.*}}
func.func @residual_norm(%x: tensor<2x3x4xf32>, %h: tensor<2x3x4xf32>, %b: tensor<4xf32>, %w: tensor<4xf32>, %beta: tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %s, %y = tp.residual_layer_norm %x, %h, %b, %w, %beta : tensor<2x3x4xf32>, tensor<4xf32>
  return %s, %y : tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// Grouped-query attention reads q, k and v where they lie, at row strides
// H D = 16 and KV D = 8; rotary embeddings of a training sequence start at
// position 0 (a zero per sequence); SwiGLU is an elementwise generic.

// CHECK-LABEL: func.func private @llama_ops(
// CHECK-DAG: %[[LDQ:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[LDKV:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[FOUR:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[NO_RATE:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK: call @mrt_attention_fwd_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[LDQ]], %[[LDKV]], %{{.*}}, %{{.*}}, %[[TWO]], %[[LDKV]], %[[FOUR]], %[[TWO]], %[[FOUR]], %[[NO_RATE]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[FOUR]])
// CHECK: %[[ZEROS:.*]] = arith.constant dense<0> : tensor<2xi32>
// CHECK: bufferization.to_buffer %[[ZEROS]]
// CHECK: %[[THETA:.*]] = arith.constant 5.000000e+05 : f64
// CHECK: %[[FORWARD:.*]] = arith.constant 1 : i64
// CHECK: call @mrt_rope_f32({{.*}}, %[[TWO]], %[[LDKV]], %[[FOUR]], %[[FOUR]], %[[THETA]], %[[FORWARD]])
// CHECK: linalg.generic
// CHECK: math.exp
func.func @llama_ops(%q: tensor<2x8x16xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x8xf32>) -> tensor<2x8x16xf32> {
  %a = tp.attention %q, %k, %v heads = 4 kv_heads = 2 : tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32> -> tensor<2x8x16xf32>
  %r = tp.rope %a heads = 4 theta = 5.0e5 : tensor<2x8x16xf32>
  %s = tp.swiglu %r, %a : tensor<2x8x16xf32>
  return %s : tensor<2x8x16xf32>
}

// -----

// A fused qkv's k and v are views 16 and 32 elements into it, read at its
// row stride 3 C = 48.

// CHECK-LABEL: func.func private @fused_attention(
// CHECK: %[[QKV:.*]] = memref.cast {{.*}} to memref<?xf32, strided<[1], offset: ?>>
// CHECK-DAG: %[[K:.*]] = memref.subview %[[QKV]][16] [%{{.*}}] [1] : memref<?xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
// CHECK-DAG: %[[V:.*]] = memref.subview %[[QKV]][32] [%{{.*}}] [1]
// CHECK-DAG: %[[LD:.*]] = arith.constant 48 : i64
// CHECK: call @mrt_attention_fwd_f32(%[[QKV]], %[[K]], %[[V]], %[[LD]], %[[LD]],
func.func @fused_attention(%qkv: tensor<2x8x48xf32>) -> tensor<2x8x16xf32> {
  %a = tp.attention %qkv heads = 4 : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  return %a : tensor<2x8x16xf32>
}

// -----

// A training step's dropout is one runtime call on the tensor as [n0, n1,
// n2] (a leading 1 added to a matrix) at its offsets in the global shape,
// keyed on the hyperparameters' seed (slot 7) and step (slot 6); without a
// key (evaluation) it is the identity.

// CHECK-LABEL: func.func private @dropout(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %[[X:.*]]: tensor<4x8xf32>, %[[HP:.*]]: tensor<8xf32>, %[[ROW:.*]]: index)
// CHECK: %[[SEED_SLOT:.*]] = tensor.extract %[[HP]][%c7]
// CHECK: %[[SEED:.*]] = arith.fptoui %[[SEED_SLOT]] : f32 to i64
// CHECK: %[[STEP_SLOT:.*]] = tensor.extract %[[HP]][%c6]
// CHECK: %[[STEP:.*]] = arith.fptoui %[[STEP_SLOT]] : f32 to i64
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[FOUR:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[EIGHT:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[FIRST:.*]] = arith.index_cast %[[ROW]] : index to i64
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[RATE:.*]] = arith.constant 1.000000e-01 : f32
// CHECK-DAG: %[[STREAM:.*]] = arith.index_cast %c9 : index to i64
// CHECK: call @mrt_dropout_f32(%{{.*}}, %{{.*}}, %[[ONE]], %[[FOUR]], %[[EIGHT]], %[[ZERO]], %[[FIRST]], %{{.*}}, %[[ROWS]], %[[EIGHT]], %[[RATE]], %[[SEED]], %[[STEP]], %[[STREAM]])
// CHECK-NOT: mrt_dropout_f32(
// CHECK: return %{{.*}}, %[[X]]
func.func @dropout(%x: tensor<4x8xf32>, %hp: tensor<8xf32>, %i: index) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c9 = arith.constant 9 : index
  %0 = tp.dropout %x dropout = 0.1 stream = %c9 at [%i, %c0] of [16, 8] key(%hp : tensor<8xf32>) : tensor<4x8xf32>
  %1 = tp.dropout %x dropout = 0.1 stream = %c9 : tensor<4x8xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Attention's dropout follows the sizes: the rate, seed, step, stream, the
// rank's first sequence and head, and the global heads.

// CHECK-LABEL: func.func private @attention_dropout(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: tensor<2x8x48xf32>, %{{.*}}: tensor<8xf32>, %[[B:.*]]: index, %[[H:.*]]: index)
// CHECK: %[[SEED:.*]] = arith.fptoui %{{.*}} : f32 to i64
// CHECK: %[[STEP:.*]] = arith.fptoui %{{.*}} : f32 to i64
// CHECK-DAG: %[[RATE:.*]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG: %[[FOUR:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[FIRST_B:.*]] = arith.index_cast %[[B]] : index to i64
// CHECK-DAG: %[[FIRST_H:.*]] = arith.index_cast %[[H]] : index to i64
// CHECK-DAG: %[[HEADS:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[STREAM:.*]] = arith.index_cast %c5 : index to i64
// CHECK: call @mrt_attention_fwd_f32({{.*}}, %[[RATE]], %[[SEED]], %[[STEP]], %[[STREAM]], %[[FIRST_B]], %[[FIRST_H]], %[[HEADS]])
func.func @attention_dropout(%qkv: tensor<2x8x48xf32>, %hp: tensor<8xf32>, %b: index, %h: index) -> tensor<2x8x16xf32> {
  %c5 = arith.constant 5 : index
  %a = tp.attention %qkv heads = 4 dropout = 0.25 stream = %c5 at [%b, %h] of [4, 8] key(%hp : tensor<8xf32>) : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  return %a : tensor<2x8x16xf32>
}

// -----

// RMS norm: its forward writes y and rstd; its gradient recomputes rstd and
// writes dx and dw; the residual form writes the sum too.

// CHECK-LABEL: func.func private @rms_norm(
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[COLS:.*]] = arith.constant 4 : i64
// CHECK: call @mrt_rmsnorm_fwd_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ROWS]], %[[COLS]], %{{.*}})
// CHECK: call @mrt_rmsnorm_stats_f32(%{{.*}}, %{{.*}}, %[[ROWS]], %[[COLS]], %{{.*}})
// CHECK: call @mrt_rmsnorm_bwd_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ROWS]], %[[COLS]])
// CHECK: call @mrt_residual_rmsnorm_fwd_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ROWS]], %[[COLS]], %{{.*}})
// CHECK-NOT: linalg.generic
func.func @rms_norm(%x: tensor<2x3x4xf32>, %w: tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x4xf32>) {
  %y = tp.rms_norm %x, %w : tensor<2x3x4xf32>, tensor<4xf32>
  %dx, %dw = tp.rms_norm_grad %x, %w, %y {epsilon = 1.0e-5 : f32} : tensor<2x3x4xf32>, tensor<4xf32> -> tensor<4xf32>
  %s, %r = tp.residual_rms_norm %x, %dx, %w : tensor<2x3x4xf32>, tensor<4xf32>
  return %s, %dw, %r : tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x4xf32>
}

// -----

// bf16 storage calls the runtime's _bf16 kernels; a bf16 GEMM may write the
// fp32 gradient of a weight.

// CHECK-LABEL: func.func private @bf16_kernels(
// CHECK: call @mrt_gemm_bf16({{.*}}) : ({{.*}}memref<?xbf16, strided<[1], offset: ?>>, i64, memref<?xbf16, strided<[1], offset: ?>>, i64, f32, memref<?xbf16, strided<[1], offset: ?>>, i64) -> ()
// CHECK: call @mrt_gemm_bf16_f32({{.*}}) : ({{.*}}memref<?xbf16, strided<[1], offset: ?>>, i64, memref<?xbf16, strided<[1], offset: ?>>, i64, f32, memref<?xf32, strided<[1], offset: ?>>, i64) -> ()
// CHECK: call @mrt_layernorm_fwd_bf16({{.*}}) : (memref<?xbf16, strided<[1], offset: ?>>, memref<?xbf16, strided<[1], offset: ?>>, memref<?xbf16, strided<[1], offset: ?>>, memref<?xbf16, strided<[1], offset: ?>>, memref<?xf32, strided<[1], offset: ?>>, memref<?xf32, strided<[1], offset: ?>>, i64, i64, f32) -> ()
func.func @bf16_kernels(%x: tensor<4x8xbf16>, %w: tensor<8x8xbf16>, %g: tensor<8xbf16>)
    -> (tensor<4x8xbf16>, tensor<8x8xf32>, tensor<4x8xbf16>) {
  %y = tp.matmul %x, %w : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %dw = tp.weight_grad %x, %y : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<8x8xf32>
  %n = tp.layer_norm %y, %g, %g : tensor<4x8xbf16>, tensor<8xbf16>
  return %y, %dw, %n : tensor<4x8xbf16>, tensor<8x8xf32>, tensor<4x8xbf16>
}

// -----

// Elementwise bodies compute in fp32 on bf16 storage: operands widen, the
// result rounds once. tp.convert is such a body with nothing in between.

// CHECK-LABEL: func.func private @bf16_elementwise(
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %{{.*}}: bf16):
// CHECK-DAG: %[[AW:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-DAG: %[[BW:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK: %[[S:.*]] = arith.addf %[[AW]], %[[BW]] : f32
// CHECK: %[[R:.*]] = arith.truncf %[[S]] : f32 to bf16
// CHECK: linalg.yield %[[R]] : bf16
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[V:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT: %[[VW:.*]] = arith.extf %[[V]] : bf16 to f32
// CHECK-NEXT: linalg.yield %[[VW]] : f32
func.func @bf16_elementwise(%x: tensor<4x8xbf16>, %b: tensor<8xbf16>) -> tensor<4x8xf32> {
  %y = tp.bias_add %x, %b : tensor<4x8xbf16>, tensor<8xbf16>
  %f = tp.convert %y : tensor<4x8xbf16> -> tensor<4x8xf32>
  return %f : tensor<4x8xf32>
}

// -----

// The runtime stores f32 and bf16 only.

func.func @f16_gemm(%x: tensor<4x8xf16>, %w: tensor<8x8xf16>) -> tensor<4x8xf16> {
  // expected-error @+1 {{'tp.matmul' op has no runtime lowering for element type 'f16'; the runtime stores f32 and bf16}}
  %y = tp.matmul %x, %w : tensor<4x8xf16>, tensor<8x8xf16> -> tensor<4x8xf16>
  return %y : tensor<4x8xf16>
}

// -----

func.func @f32_gradient_to_bf16(%x: tensor<4x8xf32>) -> tensor<8x8xbf16> {
  // expected-error @+1 {{'tp.weight_grad' op has no runtime GEMM from 'f32' operands to a 'bf16' result}}
  %dw = tp.weight_grad %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xbf16>
  return %dw : tensor<8x8xbf16>
}

// -----

// A group's squares land in the slots of one f64 buffer (device memory on a
// GPU) and come back in one read: one synchronisation per group.

// CHECK-LABEL: func.func private @sum_squares(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %[[A:.*]]: tensor<8x4xf32>, %[[B:.*]]: tensor<8xf32>) -> f32
// CHECK: %[[SUMS:.*]] = memref.alloc() : memref<2xf64>
// CHECK: %[[VIEW:.*]] = memref.cast %[[SUMS]] : memref<2xf64> to memref<?xf64, strided<[1], offset: ?>>
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK: call @mrt_sum_squares_f32(%{{.*}}, %{{.*}}, %[[VIEW]], %[[ZERO]])
// CHECK: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK: call @mrt_sum_squares_f32(%{{.*}}, %{{.*}}, %[[VIEW]], %[[ONE]])
// CHECK: %[[TWO:.*]] = arith.constant 2 : i64
// CHECK: %[[TOTAL:.*]] = call @mrt_sum_f64(%[[VIEW]], %[[TWO]]) : (memref<?xf64, strided<[1], offset: ?>>, i64) -> f64
// CHECK: %[[F32:.*]] = arith.truncf %[[TOTAL]] : f64 to f32
// CHECK: return %[[F32]]
func.func @sum_squares(%a: tensor<8x4xf32>, %b: tensor<8xf32>) -> f32 {
  %s = tp.sum_squares %a, %b : tensor<8x4xf32>, tensor<8xf32>
  return %s : f32
}

// -----

// A GEMM whose one use adds a [N] bias writes the sum itself; a GEMM with
// another use keeps its result and the bias add stays elementwise.

// CHECK-LABEL: func.func private @gemm_bias(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %[[X:.*]]: tensor<2x3x4xbf16>, %[[W:.*]]: tensor<4x5xbf16>, %[[B:.*]]: tensor<5xbf16>)
// CHECK: %[[BB:.*]] = bufferization.to_buffer %[[B]] read_only
// CHECK: %[[BV:.*]] = memref.cast %[[BB]] : memref<5xbf16, strided<[1], offset: ?>> to memref<?xbf16, strided<[1], offset: ?>>
// CHECK: call @mrt_gemm_bias_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BV]], %{{.*}}, %{{.*}}) : (i32, i32, i64, i64, i64, memref<?xbf16, strided<[1], offset: ?>>, i64, memref<?xbf16, strided<[1], offset: ?>>, i64, memref<?xbf16, strided<[1], offset: ?>>, memref<?xbf16, strided<[1], offset: ?>>, i64) -> ()
// CHECK: call @mrt_gemm_bf16(
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK-NOT: tp.
func.func @gemm_bias(%x: tensor<2x3x4xbf16>, %w: tensor<4x5xbf16>, %b: tensor<5xbf16>)
    -> (tensor<2x3x5xbf16>, tensor<2x3x5xbf16>, tensor<2x3x5xbf16>) {
  %y = tp.matmul %x, %w : tensor<2x3x4xbf16>, tensor<4x5xbf16> -> tensor<2x3x5xbf16>
  %yb = tp.bias_add %y, %b : tensor<2x3x5xbf16>, tensor<5xbf16>
  %z = tp.matmul %x, %w : tensor<2x3x4xbf16>, tensor<4x5xbf16> -> tensor<2x3x5xbf16>
  %zb = tp.bias_add %z, %b : tensor<2x3x5xbf16>, tensor<5xbf16>
  return %yb, %z, %zb : tensor<2x3x5xbf16>, tensor<2x3x5xbf16>, tensor<2x3x5xbf16>
}

// -----

// GELU of a GEMM + bias is the GEMM's epilogue too, which also keeps GELU's
// input for the gradient; with a row length that is not a multiple of 8
// (cuBLASLt's rule for that input) GELU stays elementwise.

// CHECK-LABEL: func.func private @gemm_bias_gelu(
// CHECK: %[[PRE:.*]] = memref.alloc() : memref<6x16xbf16>
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<6x16xbf16>
// CHECK: call @mrt_gemm_bias_gelu_bf16({{.*}}) : (i32, i32, i64, i64, i64, memref<?xbf16, strided<[1], offset: ?>>, i64, memref<?xbf16, strided<[1], offset: ?>>, i64, memref<?xbf16, strided<[1], offset: ?>>, memref<?xbf16, strided<[1], offset: ?>>, memref<?xbf16, strided<[1], offset: ?>>, i64) -> ()
// CHECK-DAG: %[[G:.*]] = bufferization.to_tensor %[[OUT]]
// CHECK-DAG: %[[P:.*]] = bufferization.to_tensor %[[PRE]]
// CHECK: call @mrt_gemm_bias_bf16(
// CHECK: linalg.generic
// CHECK: math.tanh
// CHECK: return %[[G]], %[[P]],
func.func @gemm_bias_gelu(%x: tensor<6x4xbf16>, %w: tensor<4x16xbf16>, %b: tensor<16xbf16>,
                          %w2: tensor<4x12xbf16>, %b2: tensor<12xbf16>)
    -> (tensor<6x16xbf16>, tensor<6x16xbf16>, tensor<6x12xbf16>) {
  %y = tp.matmul %x, %w : tensor<6x4xbf16>, tensor<4x16xbf16> -> tensor<6x16xbf16>
  %yb = tp.bias_add %y, %b : tensor<6x16xbf16>, tensor<16xbf16>
  %g = tp.gelu %yb : tensor<6x16xbf16>
  %z = tp.matmul %x, %w2 : tensor<6x4xbf16>, tensor<4x12xbf16> -> tensor<6x12xbf16>
  %zb = tp.bias_add %z, %b2 : tensor<6x12xbf16>, tensor<12xbf16>
  %h = tp.gelu %zb : tensor<6x12xbf16>
  return %g, %yb, %h : tensor<6x16xbf16>, tensor<6x16xbf16>, tensor<6x12xbf16>
}

// -----

// The element types are checked before the fused lowerings too.

func.func @f16_residual_norm(%x: tensor<4x8xf16>, %d: tensor<4x8xf16>, %b: tensor<8xf16>,
                             %w: tensor<8xf16>, %beta: tensor<8xf16>) -> tensor<4x8xf16> {
  // expected-error @+1 {{'tp.residual_layer_norm' op has no runtime lowering for element type 'f16'; the runtime stores f32 and bf16}}
  %sum, %y = tp.residual_layer_norm %x, %d, %b, %w, %beta : tensor<4x8xf16>, tensor<8xf16>
  return %y : tensor<4x8xf16>
}

// -----

// The gradient norm and AdamW work on the fp32 gradients and masters.

func.func @bf16_sum_squares(%g: tensor<8xbf16>) -> f32 {
  // expected-error @+1 {{'tp.sum_squares' op sums the squares of f32 gradients only, got 'tensor<8xbf16>'}}
  %s = tp.sum_squares %g : tensor<8xbf16>
  return %s : f32
}

// -----

// AdamW keeps every element where the step is skipped (apply false).
// CHECK-LABEL: func.func private @adamw(
// CHECK-SAME: %[[OK:[a-z0-9]+]]: i1)
// CHECK: linalg.generic
// CHECK: ^bb0(%[[G:.*]]: f32, %[[P:.*]]: f32, %[[M:.*]]: f32, %[[V:.*]]: f32):
// CHECK-DAG: arith.select %[[OK]], %{{.*}}, %[[P]] : f32
// CHECK-DAG: arith.select %[[OK]], %{{.*}}, %[[M]] : f32
// CHECK-DAG: arith.select %[[OK]], %{{.*}}, %[[V]] : f32
func.func @adamw(%p: tensor<8xf32>, %g: tensor<8xf32>, %h: tensor<8xf32>, %s: f32, %ok: i1)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %np, %nm, %nv = tp.adamw %p, %g, %p, %p, %h, %s if %ok : tensor<8xf32>, tensor<8xf32>
  return %np, %nm, %nv : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

func.func @bf16_adamw(%p: tensor<8xbf16>, %h: tensor<8xf32>, %s: f32, %ok: i1)
    -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>) {
  // expected-error @+1 {{'tp.adamw' op updates fp32 master weights only, got 'tensor<8xbf16>'}}
  %np, %nm, %nv = tp.adamw %p, %p, %p, %p, %h, %s if %ok : tensor<8xbf16>, tensor<8xf32>
  return %np, %nm, %nv : tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>
}

// -----

// A bucket: each sum started on a copy of its tensor, over dp (axis 0);
// the last ticket completes them all, and the sums are read after it.
// CHECK-LABEL: func.func private @bucket(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr,
// CHECK: memref.copy %{{.*}}, %[[A:.*]] : memref<4x8xf32> to memref<4x8xf32>
// CHECK: call @mrt_all_reduce_start_f32(%[[CTX]], %[[DP:.*]], %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, i32, memref<?xf32, strided<[1], offset: ?>>, i64, i32) -> i64
// CHECK: memref.copy %{{.*}}, %[[B:.*]] : memref<8xf32> to memref<8xf32>
// CHECK: %[[LAST:.*]] = call @mrt_all_reduce_start_f32(%[[CTX]], %[[DP]], %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, i32, memref<?xf32, strided<[1], offset: ?>>, i64, i32) -> i64
// CHECK-NEXT: call @mrt_collective_wait(%[[CTX]], %[[LAST]]) : (!llvm.ptr, i64) -> ()
// CHECK-NEXT: bufferization.to_tensor %[[A]]
// CHECK-NEXT: bufferization.to_tensor %[[B]]
tp.mesh @mesh axes = ["dp" = 2]
func.func @bucket(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %r:2 = tp.all_reduce_bucket sum %a, %b over @mesh["dp"] : tensor<4x8xf32>, tensor<8xf32>
  return %r#0, %r#1 : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// A bucket of reduce-scatters (ZeRO-1's gradients over dp): each started on
// a copy of its whole tensor with this rank's element count; after the last
// ticket's wait, the rows the runtime left at each copy's start are the
// results.
// CHECK-LABEL: func.func private @scatter_bucket(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr,
// CHECK: memref.copy %{{.*}}, %[[A:.*]] : memref<4x8xf32> to memref<4x8xf32>
// CHECK: %[[A_ROWS:.*]] = arith.constant 16 : i64
// CHECK: call @mrt_reduce_scatter_start_f32(%[[CTX]], %[[DP:.*]], %{{.*}}, %[[A_ROWS]]) : (!llvm.ptr, i32, memref<?xf32, strided<[1], offset: ?>>, i64) -> i64
// CHECK: memref.copy %{{.*}}, %[[B:.*]] : memref<8xf32> to memref<8xf32>
// CHECK: %[[B_ROWS:.*]] = arith.constant 4 : i64
// CHECK: %[[LAST:.*]] = call @mrt_reduce_scatter_start_f32(%[[CTX]], %[[DP]], %{{.*}}, %[[B_ROWS]]) : (!llvm.ptr, i32, memref<?xf32, strided<[1], offset: ?>>, i64) -> i64
// CHECK-NEXT: call @mrt_collective_wait(%[[CTX]], %[[LAST]]) : (!llvm.ptr, i64) -> ()
// CHECK-NEXT: %[[A_SUM:.*]] = bufferization.to_tensor %[[A]]
// CHECK-NEXT: %[[A_MINE:.*]] = tensor.extract_slice %[[A_SUM]][0, 0] [2, 8] [1, 1] : tensor<4x8xf32> to tensor<2x8xf32>
// CHECK-NEXT: %[[B_SUM:.*]] = bufferization.to_tensor %[[B]]
// CHECK-NEXT: %[[B_MINE:.*]] = tensor.extract_slice %[[B_SUM]][0] [4] [1] : tensor<8xf32> to tensor<4xf32>
// CHECK: return %[[A_MINE]], %[[B_MINE]]
tp.mesh @mesh axes = ["dp" = 2]
func.func @scatter_bucket(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<4xf32>) {
  %r:2 = tp.reduce_scatter_bucket sum %a, %b over @mesh["dp"] : tensor<4x8xf32>, tensor<8xf32> -> tensor<2x8xf32>, tensor<4xf32>
  return %r#0, %r#1 : tensor<2x8xf32>, tensor<4xf32>
}

// -----

// A started reduce-scatter: its ticket and buffer travel to the wait, after
// which this rank's rows are read.
// CHECK-LABEL: func.func private @scatter_started(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr,
// CHECK: memref.copy %{{.*}}, %[[BUF:.*]] : memref<4x8xf32> to memref<4x8xf32>
// CHECK: %[[TICKET:.*]] = call @mrt_reduce_scatter_start_f32(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, i32, memref<?xf32, strided<[1], offset: ?>>, i64) -> i64
// CHECK: call @mrt_gemm_f32
// CHECK: call @mrt_collective_wait(%[[CTX]], %[[TICKET]]) : (!llvm.ptr, i64) -> ()
// CHECK-NEXT: %[[SUM:.*]] = bufferization.to_tensor %[[BUF]]
// CHECK-NEXT: %[[MINE:.*]] = tensor.extract_slice %[[SUM]][0, 0] [2, 8] [1, 1]
// CHECK: return %[[MINE]],
tp.mesh @mesh axes = ["dp" = 2]
func.func @scatter_started(%dw: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<2x8xf32>, tensor<4x8xf32>) {
  %p = tp.reduce_scatter_start sum %dw over @mesh["dp"] : tensor<4x8xf32>
  %y = tp.matmul %dw, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %rows = tp.wait %p : tensor<2x8xf32>
  return %rows, %y : tensor<2x8xf32>, tensor<4x8xf32>
}

// -----

// A started all-gather of bf16 rows: this rank's rows copied into their
// place (its rank along dp times 2 rows) in a buffer of the whole tensor,
// which the runtime fills in place; the whole tensor is read after the
// wait.
// CHECK-LABEL: func.func private @gather_started(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr,
// CHECK: %[[RANK:.*]] = call @mrt_axis_rank(%[[CTX]], %[[DP:.*]]) : (!llvm.ptr, i32) -> i64
// CHECK: %[[R:.*]] = arith.index_cast %[[RANK]] : i64 to index
// CHECK: %[[BUF:.*]] = memref.alloc() {{.*}}: memref<4x8xbf16>
// CHECK: %[[ROW:.*]] = arith.muli %[[R]], %c2
// CHECK: %[[MINE:.*]] = memref.subview %[[BUF]][%[[ROW]], 0] [2, 8] [1, 1]
// CHECK: memref.copy %{{.*}}, %[[MINE]]
// CHECK: %[[TICKET:.*]] = call @mrt_all_gather_start_bf16(%[[CTX]], %[[DP]], %{{.*}}, %{{.*}}) : (!llvm.ptr, i32, memref<?xbf16, strided<[1], offset: ?>>, i64) -> i64
// CHECK: call @mrt_collective_wait(%[[CTX]], %[[TICKET]]) : (!llvm.ptr, i64) -> ()
// CHECK-NEXT: %[[WHOLE:.*]] = bufferization.to_tensor %[[BUF]]
// CHECK: return %[[WHOLE]]
tp.mesh @mesh axes = ["dp" = 2]
func.func @gather_started(%rows: tensor<2x8xbf16>) -> tensor<4x8xbf16> {
  %p = tp.all_gather_start %rows over @mesh["dp"] : tensor<2x8xbf16>
  %whole = tp.wait %p : tensor<4x8xbf16>
  return %whole : tensor<4x8xbf16>
}

// -----

// A started max over tp (axis 1) in bf16: its ticket travels to the wait,
// which the weight gradient's GEMM precedes; the sum becomes a tensor only
// after the wait.
// CHECK-LABEL: func.func private @started(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr,
// CHECK: memref.copy %{{.*}}, %[[BUF:.*]] : memref<4x8xbf16> to memref<4x8xbf16>
// CHECK: %[[MAX:.*]] = arith.constant 1 : i32
// CHECK: %[[TICKET:.*]] = call @mrt_all_reduce_start_bf16(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}, %[[MAX]]) : (!llvm.ptr, i32, memref<?xbf16, strided<[1], offset: ?>>, i64, i32) -> i64
// CHECK: call @mrt_gemm_bf16
// CHECK: call @mrt_collective_wait(%[[CTX]], %[[TICKET]]) : (!llvm.ptr, i64) -> ()
// CHECK-NEXT: %[[SUM:.*]] = bufferization.to_tensor %[[BUF]]
// CHECK: return %[[SUM]],
tp.mesh @mesh axes = ["tp" = 2]
func.func @started(%dx: tensor<4x8xbf16>, %w: tensor<8x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %p = tp.all_reduce_start max %dx over @mesh["tp"] : tensor<4x8xbf16>
  %y = tp.matmul %dx, %w : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %sum = tp.wait %p : tensor<4x8xbf16>
  return %sum, %y : tensor<4x8xbf16>, tensor<4x8xbf16>
}

// -----

// A call of a function of the program (an outlined layer) passes the
// caller's runtime context; a 0-d result the callee returns as a scalar is
// a tensor again for the caller.

// CHECK-LABEL: func.func private @layer(
// CHECK-SAME:      %{{.*}}: !llvm.ptr, %[[S:.*]]: tensor<f32>) -> f32
// CHECK-LABEL: func.func private @caller(
// CHECK-SAME:      %[[CTX:.*]]: !llvm.ptr, %[[X:.*]]: tensor<f32>)
// CHECK:         %[[R:.*]] = call @layer(%[[CTX]], %[[X]]) : (!llvm.ptr, tensor<f32>) -> f32
// CHECK:         tensor.from_elements %[[R]] : tensor<f32>
func.func private @layer(%s: tensor<f32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func @caller(%x: tensor<f32>) -> tensor<4xf32> {
  %r = call @layer(%x) : (tensor<f32>) -> tensor<f32>
  %v = tensor.extract %r[] : tensor<f32>
  %t = tensor.from_elements %v, %v, %v, %v : tensor<4xf32>
  return %t : tensor<4xf32>
}
