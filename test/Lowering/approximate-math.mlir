// RUN: megatron-opt %s -megatron-approximate-math | FileCheck %s

// f32 tanh and exp become arithmetic the loop vectoriser takes: no math op
// (and so no libm call) is left.
// CHECK-LABEL: func.func @gelu_grad_pieces
// CHECK-NOT: math.tanh
// CHECK-NOT: math.exp
// CHECK: arith.divf
// CHECK-NOT: math.tanh
// CHECK-NOT: math.exp
// CHECK: math.floor
// CHECK-NOT: math.tanh
// CHECK-NOT: math.exp
// CHECK: return
func.func @gelu_grad_pieces(%x: f32) -> (f32, f32) {
  %t = math.tanh %x : f32
  %e = math.exp %x : f32
  return %t, %e : f32, f32
}

// Other element types keep their op, for math-expand-ops or LLVM.
// CHECK-LABEL: func.func @f64_kept
// CHECK: math.tanh %{{.*}} : f64
// CHECK: math.exp %{{.*}} : f64
func.func @f64_kept(%x: f64) -> (f64, f64) {
  %t = math.tanh %x : f64
  %e = math.exp %x : f64
  return %t, %e : f64, f64
}
