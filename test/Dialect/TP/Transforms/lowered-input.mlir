// The passes that build, report on or lower a per-rank program refuse one
// in another dialect, such as their own lowered output fed back, at the first
// op of each kind, rather than pass it through unchanged or report nothing;
// tp-predict takes the global program only.
// RUN: not megatron-opt %s -split-input-file -tp-autodiff -o /dev/null 2>&1 | FileCheck %s --check-prefix=AUTODIFF
// RUN: not megatron-opt %s -split-input-file -tp-explain -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN
// RUN: not megatron-opt %s -split-input-file -tp-predict=tp=2 -o /dev/null 2>&1 | FileCheck %s --check-prefix=PREDICT

// AUTODIFF: lowered-input.mlir:[[# @LINE + 4]]:1: error: 'llvm.func' is not part of a program tp-autodiff takes: it takes the tp, linalg and scf dialects (with func, arith, tensor, math and bufferization), not the llvm dialect{{$}}
// AUTODIFF-NOT: 'llvm.return'
// EXPLAIN: lowered-input.mlir:[[# @LINE + 2]]:1: error: 'llvm.func' is not part of a program tp-explain takes
// PREDICT: lowered-input.mlir:[[# @LINE + 1]]:1: error: 'llvm.func' is not part of a program tp-predict takes: it takes the tp dialects
llvm.func @step(%x: f32) -> f32 {
  llvm.return %x : f32
}

// -----

// PREDICT: lowered-input.mlir:[[# @LINE + 2]]:1: error: '@step' is already partitioned (a per-rank program); tp-predict takes the program at global shapes
tp.mesh @mesh axes = ["tp" = 2]
func.func @step(%w: tensor<8x16xf32> {tp.global_shape = array<i64: 8, 32>}) -> tensor<8x16xf32> attributes {tp.partitioned} {
  return %w : tensor<8x16xf32>
}
