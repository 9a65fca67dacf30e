// RUN: megatron-opt %s -split-input-file -tp-stack-layer-arguments -verify-diagnostics | FileCheck %s

// The same weight of layers 0 and 1 is one argument, its first member's
// manifest position; each member a slice of it, and the results updating
// them one result updating the stack. The moment of one layer's weight has
// no family and stays; so does the argument of no layer.
// CHECK: tp.step = {entries = [{arguments = array<i32: 0, 1, 3>, function = "step", kind = "forward"}]
// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[W:.*]]: tensor<2x4xf32> {tp.name = "h.0.w", tp.role = "param"}, %[[X:.*]]: tensor<4xf32> {tp.name = "x", tp.role = "param"}, %[[M:.*]]: tensor<4xf32> {tp.name = "h.0.w.exp_avg", tp.param = "h.0.w", tp.role = "adam_m"})
// CHECK-SAME:    -> (tensor<2x4xf32> {tp.updates = 0 : i64}, tensor<4xf32> {tp.updates = 1 : i64})
// CHECK:         %[[W0:.*]] = tensor.extract_slice %[[W]][0, 0] [1, 4] [1, 1] : tensor<2x4xf32> to tensor<4xf32>
// CHECK:         %[[W1:.*]] = tensor.extract_slice %[[W]][1, 0] [1, 4] [1, 1] : tensor<2x4xf32> to tensor<4xf32>
// CHECK:         %[[A:.*]] = tp.add %[[W0]], %[[X]]
// CHECK:         %[[B:.*]] = tp.add %[[W1]], %[[M]]
// CHECK:         %[[S0:.*]] = tensor.insert_slice %[[A]] into %[[W]][0, 0] [1, 4] [1, 1]
// CHECK:         %[[S1:.*]] = tensor.insert_slice %[[B]] into %[[S0]][1, 0] [1, 4] [1, 1]
// CHECK:         return %[[S1]], %[[X]]
module attributes {tp.step = {entries = [{arguments = array<i32: 0, 1, 2, 3>, function = "step", kind = "forward"}], manifest = "{}", target = "cpu"}} {
  func.func @step(%w0: tensor<4xf32> {tp.layer = #tp.layer<0>, tp.name = "h.0.w", tp.role = "param"},
                  %x: tensor<4xf32> {tp.name = "x", tp.role = "param"},
                  %w1: tensor<4xf32> {tp.layer = #tp.layer<1>, tp.name = "h.1.w", tp.role = "param"},
                  %m0: tensor<4xf32> {tp.name = "h.0.w.exp_avg", tp.param = "h.0.w", tp.role = "adam_m"})
      -> (tensor<4xf32> {tp.updates = 0 : i64}, tensor<4xf32> {tp.updates = 2 : i64}, tensor<4xf32> {tp.updates = 1 : i64}) attributes {tp.entry = "forward"} {
    %a = tp.add %w0, %x : tensor<4xf32>
    %b = tp.add %w1, %m0 : tensor<4xf32>
    return %a, %b, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// Layers whose weights differ in shape are no stack.
// CHECK-LABEL: func.func @unlike(
// CHECK-SAME:    %{{.*}}: tensor<4xf32> {{.*}}, %{{.*}}: tensor<8xf32> {{.*}})
module attributes {tp.step = {entries = [{arguments = array<i32: 0, 1>, function = "unlike", kind = "forward"}], manifest = "{}", target = "cpu"}} {
  func.func @unlike(%w0: tensor<4xf32> {tp.layer = #tp.layer<0>, tp.name = "h.0.w", tp.role = "param"},
                    %w1: tensor<8xf32> {tp.layer = #tp.layer<1>, tp.name = "h.1.w", tp.role = "param"}) attributes {tp.entry = "forward"} {
    return
  }
}

// -----

// Without a manifest no host allocates stacks: the arguments stay.
// CHECK-LABEL: func.func @no_manifest(
// CHECK-SAME:    %{{.*}}: tensor<4xf32> {{.*}}, %{{.*}}: tensor<4xf32> {{.*}})
func.func @no_manifest(%w0: tensor<4xf32> {tp.layer = #tp.layer<0>, tp.name = "h.0.w", tp.role = "param"},
                       %w1: tensor<4xf32> {tp.layer = #tp.layer<1>, tp.name = "h.1.w", tp.role = "param"}) {
  return
}

// -----

// An entry the record names must be a function of the module.
// expected-error @+1 {{the step's entry 'gone' is not a function of the module}}
module attributes {tp.step = {entries = [{arguments = array<i32>, function = "gone", kind = "forward"}], manifest = "{}", target = "cpu"}} {
}
