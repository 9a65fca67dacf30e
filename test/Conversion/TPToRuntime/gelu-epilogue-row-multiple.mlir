// The GEMM-GELU epilogue's row constraint is the target's
// (RuntimeTargetInfo), an option of the lowering: with rows of a multiple
// of 4 allowed, a 12-wide GELU joins its GEMM too.
// RUN: megatron-opt %s -convert-tp-to-runtime=gelu-epilogue-row-multiple=4 | FileCheck %s
// RUN: megatron-opt %s -convert-tp-to-runtime | FileCheck %s --check-prefix=DEFAULT
// RUN: not megatron-opt %s -convert-tp-to-runtime=gelu-epilogue-row-multiple=0 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK-LABEL: func.func private @gelu12(
// CHECK: call @mrt_gemm_bias_gelu_f32(
// CHECK-NOT: math.tanh
// DEFAULT-LABEL: func.func private @gelu12(
// DEFAULT: call @mrt_gemm_bias_f32(
// DEFAULT: math.tanh
// BAD: error: gelu-epilogue-row-multiple must be positive, got 0
func.func @gelu12(%x: tensor<6x4xf32>, %w: tensor<4x12xf32>, %b: tensor<12xf32>)
    -> tensor<6x12xf32> {
  %z = tp.matmul %x, %w : tensor<6x4xf32>, tensor<4x12xf32> -> tensor<6x12xf32>
  %zb = tp.bias_add %z, %b : tensor<6x12xf32>, tensor<12xf32>
  %h = tp.gelu %zb : tensor<6x12xf32>
  return %h : tensor<6x12xf32>
}
