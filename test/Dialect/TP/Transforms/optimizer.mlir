// RUN: megatron-opt %s -split-input-file -tp-optimizer -verify-diagnostics | FileCheck %s
// RUN: megatron-opt %s -split-input-file -tp-optimizer=export-grads=true -verify-diagnostics | FileCheck %s --check-prefix=GRADS

// One sharded weight and one replicated bias: AdamW state sharded like each
// parameter, the sharded squares all-reduced over tp and added to the
// replicated ones, decay on the 2-D weight only, updates written over their
// argument, and only when the loss and the norm are finite.

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8x4xf32> {tp.global_shape = array<i64: 8, 8>, tp.name = "w", tp.sharding = #tp.sharding<@m, {{\[\[}}], ["tp"]]>}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<8xf32> {tp.name = "b"}
// CHECK-SAME: %[[WM:[a-z0-9]+]]: tensor<8x4xf32> {tp.global_shape = array<i64: 8, 8>, tp.name = "w.exp_avg", tp.param = "w", tp.role = "adam_m", tp.sharding = #tp.sharding<@m, {{\[\[}}], ["tp"]]>}
// CHECK-SAME: %[[WV:[a-z0-9]+]]: tensor<8x4xf32> {{{.*}}tp.name = "w.exp_avg_sq", tp.param = "w", tp.role = "adam_v"
// CHECK-SAME: %[[BM:[a-z0-9]+]]: tensor<8xf32> {tp.name = "b.exp_avg", tp.param = "b", tp.role = "adam_m"}
// CHECK-SAME: %[[BV:[a-z0-9]+]]: tensor<8xf32> {tp.name = "b.exp_avg_sq", tp.param = "b", tp.role = "adam_v"}
// CHECK-SAME: %[[H:[a-z0-9]+]]: tensor<8xf32> {tp.name = "hyperparameters", tp.role = "hyperparameters"})
// CHECK-SAME: -> (tensor<f32>, tensor<f32>, tensor<8x4xf32> {tp.updates = 0 : i64}, tensor<8x4xf32> {tp.updates = 2 : i64}, tensor<8x4xf32> {tp.updates = 3 : i64}, tensor<8xf32> {tp.updates = 1 : i64}, tensor<8xf32> {tp.updates = 4 : i64}, tensor<8xf32> {tp.updates = 5 : i64})
// CHECK: %[[REPL:.*]] = tp.sum_squares %[[B]] {tp.phase = "optimizer"} : tensor<8xf32>
// CHECK: %[[SHARDED:.*]] = tp.sum_squares %[[W]] {tp.phase = "optimizer"} : tensor<8x4xf32>
// CHECK: %[[PACK:.*]] = tensor.from_elements %[[SHARDED]] {tp.phase = "optimizer"} : tensor<1xf32>
// CHECK: %[[SUM:.*]] = tp.all_reduce sum %[[PACK]] over @m["tp"]
// CHECK: %[[ALL:.*]] = tensor.extract %[[SUM]]
// CHECK: %[[TOTAL:.*]] = arith.addf %[[REPL]], %[[ALL]]
// CHECK: %[[NORM:.*]] = math.sqrt %[[TOTAL]]
// CHECK: %[[SCALE:.*]] = arith.select
// CHECK: %[[LOSS:.*]] = tensor.extract %{{.*}}[] {tp.phase = "optimizer"} : tensor<f32>
// CHECK: %[[LOSS_OK:.*]] = math.isfinite %[[LOSS]]
// CHECK: %[[NORM_OK:.*]] = math.isfinite %[[NORM]]
// CHECK: %[[FINITE:.*]] = arith.andi %[[LOSS_OK]], %[[NORM_OK]]
// CHECK: tp.adamw %[[W]], %{{.*}}, %[[WM]], %[[WV]], %[[H]], %[[SCALE]] if %[[FINITE]] {decay, tp.phase = "optimizer"}
// CHECK: tp.adamw %[[B]], %{{.*}}, %[[BM]], %[[BV]], %[[H]], %[[SCALE]] if %[[FINITE]] {tp.phase = "optimizer"} :

// GRADS-LABEL: func.func @step(
// GRADS-SAME: %{{[a-z0-9]+}}: tensor<8x4xf32> {{{.*}}tp.name = "w.grad", tp.param = "w", tp.role = "grad"
// GRADS: bufferization.materialize_in_destination
tp.mesh @m axes = ["tp" = 2]
func.func @step(%w: tensor<8x4xf32> {tp.global_shape = array<i64: 8, 8>, tp.name = "w", tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
                %b: tensor<8xf32> {tp.name = "b"}) -> (tensor<f32>, tensor<8x4xf32> {tp.grad_of = "w"}, tensor<8xf32> {tp.grad_of = "b"}) {
  %loss = arith.constant dense<1.0> : tensor<f32>
  return %loss, %w, %b : tensor<f32>, tensor<8x4xf32>, tensor<8xf32>
}

// -----

// Each group of gradients (replicated ones first, then by the axes that split
// them) is one tp.sum_squares, in parameter order: the runtime reads a
// group's total back once, not once per gradient.

// CHECK-LABEL: func.func @grouped_norm(
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8x4xf32>
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<8xf32>
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<8xf32>
// CHECK: tp.sum_squares %[[B]], %[[G]] {tp.phase = "optimizer"} : tensor<8xf32>, tensor<8xf32>
// CHECK: tp.sum_squares %[[W]] {tp.phase = "optimizer"} : tensor<8x4xf32>
// CHECK-NOT: tp.sum_squares
tp.mesh @m axes = ["tp" = 2]
func.func @grouped_norm(%w: tensor<8x4xf32> {tp.global_shape = array<i64: 8, 8>, tp.name = "w", tp.sharding = #tp.sharding<@m, [[], ["tp"]]>},
                        %b: tensor<8xf32> {tp.name = "b"}, %g: tensor<8xf32> {tp.name = "g"})
    -> (tensor<f32>, tensor<8x4xf32> {tp.grad_of = "w"}, tensor<8xf32> {tp.grad_of = "b"},
        tensor<8xf32> {tp.grad_of = "g"}) {
  %loss = arith.constant dense<1.0> : tensor<f32>
  return %loss, %w, %b, %g : tensor<f32>, tensor<8x4xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// expected-error @+1 {{tp-optimizer needs the gradients tp-autodiff returns (results with tp.grad_of)}}
func.func @forward_only(%x: tensor<4xf32> {tp.name = "x"}) -> tensor<f32> {
  %loss = arith.constant dense<1.0> : tensor<f32>
  return %loss : tensor<f32>
}
