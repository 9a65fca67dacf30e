// RUN: megatron-opt %s -tp-overlap-collectives="axes=dp" | FileCheck %s
// RUN: megatron-opt %s -tp-overlap-collectives | FileCheck %s --check-prefix=ALL
// RUN: megatron-opt %s -split-input-file -tp-overlap-collectives="axes=pp" -verify-diagnostics -o /dev/null

// axes=dp starts the data-parallel bucket early and leaves the
// tensor-parallel sum blocking, though work could hide it (Megatron-LM's
// synchronous f and g); without axes, both start early.
// CHECK-LABEL: func.func @only_dp(
// CHECK: %[[P:.*]] = tp.all_reduce_start sum %{{.*}} over @m["dp"]
// CHECK-NEXT: %[[SUM:.*]] = tp.all_reduce sum %{{.*}} over @m["tp"]
// CHECK-NEXT: %[[W:.*]] = tp.gelu
// CHECK-NEXT: tp.add %[[SUM]], %[[W]]
// CHECK-NEXT: tp.wait %[[P]]
// ALL-LABEL: func.func @only_dp(
// ALL-DAG: tp.all_reduce_start sum %{{.*}} over @m["dp"]
// ALL-DAG: tp.all_reduce_start sum %{{.*}} over @m["tp"]
// ALL: tp.gelu
// ALL-NEXT: tp.wait
// expected-error @+1 {{tp-overlap-collectives: axes names 'pp', an axis no tp.mesh of the program has}}
module {
  tp.mesh @m axes = ["dp" = 2, "tp" = 2]
  func.func @only_dp(%grad: tensor<4x16xf32>, %dx: tensor<4x16xf32>) -> tensor<4x16xf32> {
    %sums = tp.all_reduce_bucket sum %grad over @m["dp"] : tensor<4x16xf32>
    %sum = tp.all_reduce sum %dx over @m["tp"] : tensor<4x16xf32>
    %w = tp.gelu %grad : tensor<4x16xf32>
    %next = tp.add %sum, %w : tensor<4x16xf32>
    %out = tp.add %sums, %next : tensor<4x16xf32>
    return %out : tensor<4x16xf32>
  }
}
