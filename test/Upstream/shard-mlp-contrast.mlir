// MLP Y = tanh/gelu(X*A)*B, X [8,16] replicated, A [16,64] column-split, 4 ranks. Volumes: f32 per rank, ring.
// Upstream, Y pinned replicated: all_gather hidden [8,16]->[8,64]; GEMM2 [8,64]x[64,16] replicated: 3*8*16 = 384 f32 (1536 B).
// Upstream, only A annotated, and ours in both cases: B row-split [16,16]; one all_reduce of [8,16]: 2*3/4*8*16 = 192 f32 (768 B).
//
// Upstream's plan depends on where the replicated annotations are.
// sharding-propagation's default traversal (backward-forward) starts from a Y
// pinned replicated. That fixes GEMM2 fully replicated, so the column-split
// hidden is all-gathered (@mlp_pinned). With only A annotated, forward
// propagation gives GEMM2 a split K and partition emits the same single
// all-reduce as Megatron (@mlp_only_a). Pinning X alone changes nothing.
// Neither pipeline needs B annotated. Inputs/shard-mlp.mlir says why Y's
// accumulator is an argument in @mlp_only_a.

// RUN: /usr/lib/llvm-22/bin/mlir-opt %S/Inputs/shard-mlp.mlir -split-input-file --pass-pipeline="builtin.module(func.func(sharding-propagation,shard-partition))" | FileCheck %s --check-prefix=UPSTREAM --enable-var-scope
// RUN: megatron-opt %s --tp-propagate --tp-insert-conjugates --tp-partition | FileCheck %s --check-prefix=OURS --enable-var-scope
// RUN: megatron-opt %S/Inputs/shard-mlp.mlir -split-input-file --megatron-partition-pipeline | FileCheck %s --check-prefix=IMPORTED --enable-var-scope

// Both plans in one report: upstream's read back as a tp per-rank program
// (convert-shard-to-tp) and measured by tp-explain as ours is. With only A
// annotated both move one [8,16] all-reduce (512 bytes per rank); with Y
// pinned upstream gathers the [8,64] hidden (2048 bytes), four times ours.
// RUN: /usr/lib/llvm-22/bin/mlir-opt %S/Inputs/shard-mlp.mlir -split-input-file --pass-pipeline="builtin.module(func.func(sharding-propagation,shard-partition))" | megatron-opt -split-input-file --convert-shard-to-tp --tp-explain=text -o /dev/null | FileCheck %s --check-prefix=UPSTREAM-EXPLAIN
// RUN: megatron-opt %S/Inputs/shard-mlp.mlir -split-input-file --megatron-partition-pipeline --tp-explain=text -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=OURS-EXPLAIN
// UPSTREAM-EXPLAIN: communication per rank per step: 128 elements
// UPSTREAM-EXPLAIN-NEXT: all_reduce forward over tp: 1 x 128 elements
// UPSTREAM-EXPLAIN-NEXT: bytes over tp: 512
// UPSTREAM-EXPLAIN: communication per rank per step: 512 elements
// UPSTREAM-EXPLAIN-NEXT: all_gather forward over tp: 1 x 512 elements
// UPSTREAM-EXPLAIN-NEXT: bytes over tp: 2048
// OURS-EXPLAIN-NOT: all_gather
// OURS-EXPLAIN: all_reduce forward over tp: 1 x 128 elements
// OURS-EXPLAIN-NEXT: bytes over tp: 512
// OURS-EXPLAIN: all_reduce forward over tp: 1 x 128 elements
// OURS-EXPLAIN-NEXT: bytes over tp: 512
// OURS-EXPLAIN-NOT: all_gather

// Ours on upstream's own input (tp-import-shard reads its shard
// annotations): in both cases B row-split and one all-reduce; with the
// accumulator Y0 an argument, only the first rank adds it, as upstream does.
// IMPORTED-LABEL: func.func @mlp_only_a(
// IMPORTED-SAME: tensor<16x16xf32> {tp.global_shape = array<i64: 16, 64>, tp.sharding = #tp.sharding<@grid, {{\[\[}}], ["tp"]]>}
// IMPORTED-SAME: tensor<16x16xf32> {tp.global_shape = array<i64: 64, 16>, tp.sharding = #tp.sharding<@grid, {{\[}}["tp"], []]>}
// IMPORTED-NOT: tp.all_gather
// IMPORTED: tp.axis_index @grid["tp"]
// IMPORTED: arith.select
// IMPORTED: %[[P:.*]] = linalg.matmul
// IMPORTED-NEXT: %[[Y:.*]] = tp.g %[[P]] over @grid["tp"] : tensor<8x16xf32>
// IMPORTED-NEXT: return %[[Y]] : tensor<8x16xf32>
// IMPORTED-LABEL: func.func @mlp_pinned(
// IMPORTED-SAME: tensor<16x16xf32> {tp.global_shape = array<i64: 64, 16>, tp.sharding = #tp.sharding<@grid, {{\[}}["tp"], []]>}
// IMPORTED-NOT: tp.all_gather
// IMPORTED: linalg.matmul
// IMPORTED: %[[P:.*]] = linalg.matmul
// IMPORTED-NEXT: %[[Y:.*]] = tp.g %[[P]] over @grid["tp"] : tensor<8x16xf32>
// IMPORTED-NEXT: return %[[Y]] : tensor<8x16xf32>
// IMPORTED-NOT: tp.all_gather

// Upstream, only A annotated: B becomes [16,16], the hidden stays [8,16], one
// all_reduce; only process 0 adds the accumulator Y0.
// UPSTREAM-LABEL: func.func @mlp_only_a(
// UPSTREAM-SAME: %[[X:[^:]*]]: tensor<8x16xf32>, %[[A:[^:]*]]: tensor<16x16xf32>, %[[B:[^:]*]]: tensor<16x16xf32>, %[[Y0:[^:]*]]: tensor<8x16xf32>) -> tensor<8x16xf32>
// UPSTREAM-NOT: shard.all_
// UPSTREAM: %[[H:.*]] = linalg.matmul ins(%[[X]], %[[A]] : tensor<8x16xf32>, tensor<16x16xf32>) outs(%{{.*}} : tensor<8x16xf32>) -> tensor<8x16xf32>
// UPSTREAM-NOT: shard.all_
// UPSTREAM: %[[G:.*]] = linalg.generic {{.*}} ins(%[[H]] : tensor<8x16xf32>)
// UPSTREAM: math.tanh
// UPSTREAM: } -> tensor<8x16xf32>
// UPSTREAM-NOT: shard.all_
// UPSTREAM: %[[IDX:.*]] = shard.process_multi_index on @grid axes = [0] : index
// UPSTREAM: %[[IS0:.*]] = arith.cmpi eq, %[[IDX]], %{{.*}} : index
// UPSTREAM: %[[ACC:.*]] = scf.if %[[IS0]] -> (tensor<8x16xf32>) {
// UPSTREAM-NEXT: scf.yield %[[Y0]] : tensor<8x16xf32>
// UPSTREAM-NOT: shard.all_
// UPSTREAM: %[[P:.*]] = linalg.matmul ins(%[[G]], %[[B]] : tensor<8x16xf32>, tensor<16x16xf32>) outs(%[[ACC]] : tensor<8x16xf32>) -> tensor<8x16xf32>
// UPSTREAM-NEXT: %[[Y:.*]] = shard.all_reduce %[[P]] on @grid grid_axes = [0] : tensor<8x16xf32> -> tensor<8x16xf32>
// UPSTREAM-NEXT: return %[[Y]] : tensor<8x16xf32>
// UPSTREAM-NOT: shard.all_
// UPSTREAM: // -----

// Upstream, X and Y pinned replicated: the [8,16] hidden is all-gathered to
// [8,64]; tanh and GEMM2 then run replicated with B whole ([64,16]); no
// all_reduce.
// UPSTREAM-LABEL: func.func @mlp_pinned(
// UPSTREAM-SAME: %[[X:[^:]*]]: tensor<8x16xf32>, %[[A:[^:]*]]: tensor<16x16xf32>, %[[B:[^:]*]]: tensor<64x16xf32>) -> tensor<8x16xf32>
// UPSTREAM-NOT: shard.all_
// UPSTREAM: %[[H:.*]] = linalg.matmul ins(%[[X]], %[[A]] : tensor<8x16xf32>, tensor<16x16xf32>) outs(%{{.*}} : tensor<8x16xf32>) -> tensor<8x16xf32>
// UPSTREAM-NEXT: %[[HG:.*]] = shard.all_gather %[[H]] on @grid grid_axes = [0] gather_axis = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
// UPSTREAM-NEXT: %[[HC:.*]] = tensor.cast %[[HG]] : tensor<8x64xf32> to tensor<8x64xf32>
// UPSTREAM-NOT: shard.all_
// UPSTREAM: %[[G:.*]] = linalg.generic {{.*}} ins(%[[HC]] : tensor<8x64xf32>)
// UPSTREAM: math.tanh
// UPSTREAM: } -> tensor<8x64xf32>
// UPSTREAM-NOT: shard.all_
// UPSTREAM: %[[Y:.*]] = linalg.matmul ins(%[[G]], %[[B]] : tensor<8x64xf32>, tensor<64x16xf32>) outs(%{{.*}} : tensor<8x16xf32>) -> tensor<8x16xf32>
// UPSTREAM-NEXT: return %[[Y]] : tensor<8x16xf32>
// UPSTREAM-NOT: shard.all_

// Ours, only A annotated: B is made row-split, the hidden stays [8,16] per
// rank, and the only collective is one tp.g (all-reduce) after GEMM2.
// OURS-NOT: {{all_gather|all_reduce|reduce_scatter|reshard|tp\.g }}
// OURS-LABEL: func.func @mlp(
// OURS-SAME: %[[X:[^:]*]]: tensor<8x16xf32> {tp.global_shape = array<i64: 8, 16>, tp.sharding = #tp.sharding<@m, {{\[\[}}], []]>}
// OURS-SAME: %[[A:[^:]*]]: tensor<16x16xf32> {tp.global_shape = array<i64: 16, 64>, tp.sharding = #tp.sharding<@m, {{\[\[}}], ["tp"]]>}
// OURS-SAME: %[[B:[^:]*]]: tensor<16x16xf32> {tp.global_shape = array<i64: 64, 16>, tp.sharding = #tp.sharding<@m, {{\[}}["tp"], []]>}) -> tensor<8x16xf32>
// OURS-NEXT: %[[XF:.*]] = tp.f %[[X]] over @m["tp"] : tensor<8x16xf32>
// OURS-NEXT: %[[H:.*]] = tp.matmul %[[XF]], %[[A]] : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
// OURS-NEXT: %[[G:.*]] = tp.gelu %[[H]] : tensor<8x16xf32>
// OURS-NEXT: %[[P:.*]] = tp.matmul %[[G]], %[[B]] : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
// OURS-NEXT: %[[Y:.*]] = tp.g %[[P]] over @m["tp"] : tensor<8x16xf32>
// OURS-NEXT: return %[[Y]] : tensor<8x16xf32>

// Ours, X and Y pinned replicated: the same plan; the pin on Y is honoured
// by the g after GEMM2, not by gathering the hidden.
// OURS-LABEL: func.func @mlp_pinned(
// OURS-SAME: %[[B:[^:]*]]: tensor<16x16xf32> {tp.global_shape = array<i64: 64, 16>, tp.sharding = #tp.sharding<@m, {{\[}}["tp"], []]>}) -> tensor<8x16xf32>
// OURS: %[[H:.*]] = tp.matmul {{.*}} -> tensor<8x16xf32>
// OURS-NEXT: %[[G:.*]] = tp.gelu %[[H]] : tensor<8x16xf32>
// OURS-NEXT: %[[P:.*]] = tp.matmul %[[G]], %[[B]] : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
// OURS-NEXT: %[[Y:.*]] = tp.g %[[P]] over @m["tp"] : tensor<8x16xf32>
// OURS-NEXT: return %[[Y]] : tensor<8x16xf32>
// OURS-NOT: {{all_gather|all_reduce|reduce_scatter|reshard|tp\.g }}

tp.mesh @m axes = ["tp" = 4]
func.func @mlp(%x: tensor<8x16xf32>, %a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>}, %b: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  %g = tp.gelu %h : tensor<8x64xf32>
  %y = tp.matmul %g, %b : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

func.func @mlp_pinned(%x: tensor<8x16xf32> {tp.sharding = #tp.sharding<@m, [[], []]>}, %a: tensor<16x64xf32> {tp.sharding = #tp.sharding<@m, [[], ["tp"]]>}, %b: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %h = tp.matmul %x, %a : tensor<8x16xf32>, tensor<16x64xf32> -> tensor<8x64xf32>
  %g = tp.gelu %h : tensor<8x64xf32>
  %y = tp.matmul %g, %b {tp.sharding = #tp.sharding<@m, [[], []]>} : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
