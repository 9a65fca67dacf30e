// RUN: megatron-opt %s -split-input-file -megatron-copies-to-linalg -megatron-offload-to-gpu -canonicalize -verify-diagnostics | FileCheck %s

// An elementwise loop becomes one launch: the innermost dimension over
// 256-thread blocks along x, the outer ones along y and z; the function's
// launches chain on one stream and are waited for before it returns.

// CHECK-LABEL: func.func @bias_add(
// CHECK: %[[T0:.*]] = gpu.wait async
// CHECK: %[[T1:.*]] = gpu.launch async [%[[T0]]] blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads({{.*}}) in ({{.*}} = %[[C256:.*]], {{.*}}) {
// CHECK: %[[T2:.*]] = gpu.launch async [%[[T1]]]
// CHECK: gpu.wait [%[[T2]]]
// CHECK-NEXT: return
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#bias = affine_map<(d0, d1, d2) -> (d2)>
func.func @bias_add(%x: memref<2x3x500xf32>, %b: memref<500xf32>, %y: memref<2x3x500xf32>) {
  linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %b : memref<2x3x500xf32>, memref<500xf32>) outs(%y : memref<2x3x500xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  }
  memref.copy %y, %x : memref<2x3x500xf32> to memref<2x3x500xf32>
  return
}

// -----

// The hyperparameters: read on the host only, so they may stay there; their
// values reach the kernel as arguments.

// CHECK-LABEL: func.func @scaled(
// CHECK: %[[LR:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK: gpu.launch async
// CHECK: arith.mulf %{{.*}}, %[[LR]]
#map = affine_map<(d0) -> (d0)>
func.func @scaled(%p: memref<64xf32>, %hyper: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %lr = memref.load %hyper[%c0] : memref<8xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]} outs(%p : memref<64xf32>) {
  ^bb0(%o: f32):
    %s = arith.mulf %o, %lr : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A buffer both a kernel and the host read cannot live in one memory.
#map = affine_map<(d0) -> (d0)>
func.func @shared(%p: memref<64xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @below {{'memref.load' op uses an argument on the host that is not only read there}}
  %v = memref.load %p[%c0] : memref<64xf32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]} outs(%p : memref<64xf32>) {
  ^bb0(%o: f32):
    %s = arith.addf %o, %o : f32
    linalg.yield %s : f32
  }
  return %v : f32
}

// -----

// A full reduction has no parallel dimension to launch over: its loop would
// run on the host, on device memory.
#in = affine_map<(d0) -> (d0)>
#out = affine_map<(d0) -> ()>
func.func @total(%x: memref<64xf32>, %sum: memref<f32>) {
  // expected-error @below {{'memref.load' op uses an argument on the host that is not only read there}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]} ins(%x : memref<64xf32>) outs(%sum : memref<f32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The same on a buffer of the function's own.
#in = affine_map<(d0) -> (d0)>
#out = affine_map<(d0) -> ()>
func.func @local_total(%x: memref<64xf32>) {
  %sum = memref.alloc() : memref<f32>
  // expected-error @below {{'memref.load' op would access device memory from the host}}
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]} ins(%x : memref<64xf32>) outs(%sum : memref<f32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// More rows than the grid's 65535 along y: tiles of two rows, which each
// thread walks in a loop.

// CHECK-LABEL: func.func @long_rows(
// CHECK-DAG: %[[TILES:.*]] = arith.constant 35000 : index
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2 : index
// CHECK: gpu.launch async [%{{.*}}] blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %[[TILES]], %{{.*}} = %{{.*}})
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[TWO]]
// CHECK: arith.cmpi ult, %{{.*}}, %{{.*}} : index
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @long_rows(%x: memref<70000x4xf32>) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%x : memref<70000x4xf32>) {
  ^bb0(%o: f32):
    %s = arith.addf %o, %o : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Four parallel dimensions: the grid and block have three.
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @four_dims(%x: memref<2x2x2x2xf32>) {
  // expected-error @below {{'scf.parallel' op has 4 parallel dimensions; the CUDA target maps at most 3}}
  linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%x : memref<2x2x2x2xf32>) {
  ^bb0(%o: f32):
    linalg.yield %o : f32
  }
  return
}

// -----

// The grid is sized from static extents.
#map2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @dynamic_rows(%x: memref<?x4xf32>) {
  // expected-error @+1 {{dimension 0 has no static extent to size the grid with}}
  linalg.generic {indexing_maps = [#map2], iterator_types = ["parallel", "parallel"]} outs(%x : memref<?x4xf32>) {
  ^bb0(%o: f32):
    %s = arith.addf %o, %o : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A loop's launches (the micro-batch loop's) chain from the token before the
// loop, and each iteration waits for its last launch.
// CHECK-LABEL: func.func @in_loop(
// CHECK: %[[T0:.*]] = gpu.wait async
// CHECK: scf.for
// CHECK: %[[T1:.*]] = gpu.launch async [%[[T0]]]
// CHECK: gpu.wait [%[[T1]]]
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @in_loop(%x: memref<500xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    linalg.copy ins(%x : memref<500xf32>) outs(%x : memref<500xf32>)
  }
  return
}

// -----

// Kernels under any other region are refused: nothing chains them.
func.func @in_branch(%x: memref<500xf32>, %y: memref<500xf32>, %c: i1) {
  // expected-error @+1 {{'scf.if' op holds kernels, which only a loop's body or the function's may}}
  scf.if %c {
    linalg.copy ins(%x : memref<500xf32>) outs(%y : memref<500xf32>)
  }
  return
}

// -----

// Kernels come from buffers: a linalg op on tensors is refused, not lowered
// into writes to values.
func.func @on_tensors(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  // expected-error @+1 {{'linalg.generic' op works on tensors: megatron-offload-to-gpu runs on the bufferized step (after one-shot bufferization)}}
  %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %y : tensor<8xf32>
}
