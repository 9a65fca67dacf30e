// RUN: megatron-opt %s -split-input-file -tp-roll-layers | FileCheck %s

// Three calls of one layer body over the members of a stack, each reading
// the previous one's output, are one loop: the body's variant reads the
// input and the weight at the slots it is given and writes its output into
// the next slot of a stack the loop carries (the run's input in slot 0).
// The updates written back into the stack they read are one loop updating
// that stack in place; the sum of squares of every member reads the stack.
// CHECK-LABEL: func.func private @body_loop(
// CHECK-SAME:    %[[XS:[a-z0-9]+]]: tensor<4x4xf32>, %[[IN:[a-z0-9]+]]: index, %[[WS:[a-z0-9]+]]: tensor<3x4xf32>, %[[W:[a-z0-9]+]]: index, %[[OUT:[a-z0-9]+]]: index) -> tensor<4x4xf32>
// CHECK:         %[[X:.*]] = tensor.extract_slice %[[XS]][%[[IN]], 0] [1, 4] [1, 1]
// CHECK:         %[[WI:.*]] = tensor.extract_slice %[[WS]][%[[W]], 0] [1, 4] [1, 1]
// CHECK:         %[[Y:.*]] = tp.add %[[X]], %[[WI]]
// CHECK:         %[[NEXT:.*]] = tensor.insert_slice %[[Y]] into %[[XS]][%[[OUT]], 0] [1, 4] [1, 1]
// CHECK:         return %[[NEXT]]
// CHECK-LABEL: func.func private @update_loop(
// CHECK-SAME:    %[[STATE:[a-z0-9]+]]: tensor<3x4xf32>, %[[SLOT:[a-z0-9]+]]: index, %{{.*}}: tensor<4x4xf32>, %{{.*}}: index) -> tensor<3x4xf32>
// CHECK:         tensor.extract_slice %[[STATE]][%[[SLOT]], 0]
// CHECK:         %[[UPDATED:.*]] = tensor.insert_slice %{{.*}} into %[[STATE]][%[[SLOT]], 0]
// CHECK:         return %[[UPDATED]]
// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[X0:.*]]: tensor<4xf32>, %[[STACK:.*]]: tensor<3x4xf32>)
// CHECK:         %[[EMPTY:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK:         %[[FIRST:.*]] = tensor.insert_slice %[[X0]] into %[[EMPTY]][0, 0]
// CHECK:         %[[OUTS:.*]] = scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[CARRIED:.*]] = %[[FIRST]])
// CHECK:           %[[AFTER:.*]] = arith.addi %[[I]], %{{.*}}
// CHECK:           %[[R:.*]] = func.call @body_loop(%[[CARRIED]], %[[I]], %[[STACK]], %[[I]], %[[AFTER]])
// CHECK:           scf.yield %[[R]]
// CHECK:         %[[NORM:.*]] = tp.sum_squares %[[STACK]] : tensor<3x4xf32>
// CHECK:         %[[NEW:.*]] = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[W:.*]] = %[[STACK]])
// CHECK:           %[[Y:.*]] = arith.addi %[[J]], %{{.*}}
// CHECK:           func.call @update_loop(%[[W]], %[[J]], %[[OUTS]], %[[Y]])
// CHECK:         return %[[NORM]], %[[NEW]]
// CHECK-NOT:   func.func private @body(
func.func private @body(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = tp.add %x, %w : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @update(%w: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> {
  %u = tp.add %w, %g : tensor<4xf32>
  return %u : tensor<4xf32>
}
func.func @step(%x: tensor<4xf32>, %ws: tensor<3x4xf32>) -> (f32, tensor<3x4xf32>) {
  %w0 = tensor.extract_slice %ws[0, 0] [1, 4] [1, 1] : tensor<3x4xf32> to tensor<4xf32>
  %w1 = tensor.extract_slice %ws[1, 0] [1, 4] [1, 1] : tensor<3x4xf32> to tensor<4xf32>
  %w2 = tensor.extract_slice %ws[2, 0] [1, 4] [1, 1] : tensor<3x4xf32> to tensor<4xf32>
  %y0 = call @body(%x, %w0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y1 = call @body(%y0, %w1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y2 = call @body(%y1, %w2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n = tp.sum_squares %w0, %w1, %w2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  %u0 = call @update(%w0, %y0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %u1 = call @update(%w1, %y1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %u2 = call @update(%w2, %y2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s0 = tensor.insert_slice %u0 into %ws[0, 0] [1, 4] [1, 1] : tensor<4xf32> into tensor<3x4xf32>
  %s1 = tensor.insert_slice %u1 into %s0[1, 0] [1, 4] [1, 1] : tensor<4xf32> into tensor<3x4xf32>
  %s2 = tensor.insert_slice %u2 into %s1[2, 0] [1, 4] [1, 1] : tensor<4xf32> into tensor<3x4xf32>
  return %n, %s2 : f32, tensor<3x4xf32>
}

// -----

// A single call reading a stack's member calls the variant that takes the
// stack and the slot, so that no member is passed as a view; a call of whole
// values stays as it is.
// CHECK-LABEL: func.func private @body_stacked(
// CHECK-SAME:    %{{.*}}: tensor<4xf32>, %{{.*}}: tensor<2x4xf32>, %{{.*}}: index) -> tensor<4xf32>
// CHECK-LABEL: func.func @single(
// CHECK-SAME:    %[[X:.*]]: tensor<4xf32>, %[[WS:.*]]: tensor<2x4xf32>)
// CHECK:         %[[C1:.*]] = arith.constant 1 : index
// CHECK:         %[[Y:.*]] = call @body_stacked(%[[X]], %[[WS]], %[[C1]])
// CHECK:         %[[Z:.*]] = call @body(%[[Y]], %[[X]])
// CHECK:         return %[[Z]]
func.func private @body(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = tp.add %x, %w : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @single(%x: tensor<4xf32>, %ws: tensor<2x4xf32>) -> tensor<4xf32> {
  %w1 = tensor.extract_slice %ws[1, 0] [1, 4] [1, 1] : tensor<2x4xf32> to tensor<4xf32>
  %y = call @body(%x, %w1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %z = call @body(%y, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %z : tensor<4xf32>
}

// -----

// A body that returns a scalar the program reads after its calls (where a
// layer's dropout sits in the global batch) has nothing to stack it in: its
// calls stay as they are.
// CHECK-LABEL: func.func @scalar_results(
// CHECK-SAME:    %[[X:.*]]: index)
// CHECK:         %[[A:.*]] = call @offset(%[[X]]) : (index) -> index
// CHECK:         %[[B:.*]] = call @offset(%[[X]]) : (index) -> index
// CHECK:         return %[[A]], %[[B]]
func.func private @offset(%x: index) -> index {
  %c2 = arith.constant 2 : index
  %y = arith.muli %x, %c2 : index
  return %y : index
}
func.func @scalar_results(%x: index) -> (index, index) {
  %a = call @offset(%x) : (index) -> index
  %b = call @offset(%x) : (index) -> index
  return %a, %b : index, index
}

// -----

// Index constants in arithmetic progression (each layer's dropout stream)
// are the loop's induction variable times the step plus the first.
// CHECK-LABEL: func.func private @body_loop(
// CHECK-SAME:    %{{.*}}: tensor<2x4xf32>, %{{.*}}: index, %{{.*}}: tensor<3x4xf32>, %{{.*}}: index, %[[STREAM:[a-z0-9]+]]: index, %{{.*}}: index)
// CHECK:         tp.dropout %{{.*}} dropout = 1.000000e-01 stream = %[[STREAM]]
// CHECK-LABEL: func.func @streams(
// CHECK:         scf.for %[[I:[a-z0-9]+]] =
// CHECK:           %[[SCALED:.*]] = arith.muli %[[I]], %{{.*}} : index
// CHECK:           %[[S:.*]] = arith.addi %[[SCALED]], %{{.*}} : index
// CHECK:           func.call @body_loop(%{{.*}}, %{{.*}}, %{{.*}}, %[[I]], %[[S]], %{{.*}})
func.func private @body(%x: tensor<4xf32>, %w: tensor<4xf32>, %s: index) -> tensor<4xf32> {
  %y = tp.dropout %x dropout = 0.1 stream = %s : tensor<4xf32>
  %z = tp.add %y, %w : tensor<4xf32>
  return %z : tensor<4xf32>
}
func.func @streams(%x: tensor<4xf32>, %ws: tensor<3x4xf32>) -> tensor<4xf32> {
  %s0 = arith.constant 4 : index
  %s1 = arith.constant 8 : index
  %s2 = arith.constant 12 : index
  %w0 = tensor.extract_slice %ws[0, 0] [1, 4] [1, 1] : tensor<3x4xf32> to tensor<4xf32>
  %w1 = tensor.extract_slice %ws[1, 0] [1, 4] [1, 1] : tensor<3x4xf32> to tensor<4xf32>
  %w2 = tensor.extract_slice %ws[2, 0] [1, 4] [1, 1] : tensor<3x4xf32> to tensor<4xf32>
  %y0 = call @body(%x, %w0, %s0) : (tensor<4xf32>, tensor<4xf32>, index) -> tensor<4xf32>
  %y1 = call @body(%y0, %w1, %s1) : (tensor<4xf32>, tensor<4xf32>, index) -> tensor<4xf32>
  %y2 = call @body(%y1, %w2, %s2) : (tensor<4xf32>, tensor<4xf32>, index) -> tensor<4xf32>
  return %y2 : tensor<4xf32>
}
