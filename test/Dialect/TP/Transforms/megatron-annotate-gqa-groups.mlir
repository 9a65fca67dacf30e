// RUN: megatron-opt %s -tp-megatron-annotate=tp=8 -verify-diagnostics

// One factoring of "tp" serves every attention: at tp=8, 2 key/value heads
// factor it into 2 x 4 ranks, and a second attention with 4 of them cannot
// have its own 4 x 2.
func.func @two_groupings(%q: tensor<2x4x32xf32>, %x: tensor<2x4x32xf32>, %v2: tensor<2x4x8xf32>, %v4: tensor<2x4x16xf32>, %wk2: tensor<32x8xf32>, %wk4: tensor<32x16xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x32xf32>) {
  %k2 = tp.matmul %x, %wk2 : tensor<2x4x32xf32>, tensor<32x8xf32> -> tensor<2x4x8xf32>
  %k4 = tp.matmul %x, %wk4 : tensor<2x4x32xf32>, tensor<32x16xf32> -> tensor<2x4x16xf32>
  %a = tp.attention %q, %k2, %v2 heads = 8 kv_heads = 2 : tensor<2x4x32xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x32xf32>
  // expected-error @+1 {{heads are split over 2 groups of ranks elsewhere; one mesh cannot also split 4 of them}}
  %b = tp.attention %q, %k4, %v4 heads = 8 kv_heads = 4 : tensor<2x4x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x32xf32>
  return %a, %b : tensor<2x4x32xf32>, tensor<2x4x32xf32>
}
