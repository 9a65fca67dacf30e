// RUN: megatron-opt %s -split-input-file -megatron-gpu-launch-to-host-loops -verify-diagnostics | FileCheck %s

// A launch becomes loops over grid z, y, x then block z, y, x; its body sees
// them as block and thread ids; the tokens and waits go.

// CHECK-LABEL: func.func @launch(
// CHECK-NOT: gpu.wait
// CHECK: scf.for %[[BZ:.*]] = %{{.*}} to %[[GZ:.*]] step
// CHECK-NEXT: scf.for %[[BY:.*]] =
// CHECK-NEXT: scf.for %[[BX:.*]] =
// CHECK-NEXT: scf.for %[[TZ:.*]] =
// CHECK-NEXT: scf.for %[[TY:.*]] =
// CHECK-NEXT: scf.for %[[TX:.*]] =
// CHECK: %[[I:.*]] = arith.muli %[[BX]], %{{.*}}
// CHECK: arith.addi %[[I]], %[[TX]]
// CHECK-NOT: gpu.
// CHECK: return
func.func @launch(%x: memref<512xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c256 = arith.constant 256 : index
  %t0 = gpu.wait async
  %t1 = gpu.launch async [%t0] blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
      threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %sx : index
    %i = arith.addi %base, %tx : index
    %v = memref.load %x[%i] : memref<512xf32>
    %d = arith.addf %v, %v : f32
    memref.store %d, %x[%i] : memref<512xf32>
    gpu.terminator
  }
  gpu.wait [%t1]
  return
}

// -----

// Threads that synchronise cannot run one after another.
func.func @barrier() {
  %c1 = arith.constant 1 : index
  // expected-error @below {{synchronises or shares memory: its threads cannot run one by one}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
      threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    gpu.barrier
    gpu.terminator
  }
  return
}

// -----

// A body with control flow between blocks has no single sequence to clone.
func.func @branches(%c: i1) {
  %c1 = arith.constant 1 : index
  // expected-error @below {{'gpu.launch' op has more than one block}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
      threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    cf.cond_br %c, ^a, ^b
  ^a:
    gpu.terminator
  ^b:
    gpu.terminator
  }
  return
}

// -----

// A shuffle exchanges values between threads: refused like a barrier.
func.func @shuffle(%v: f32) {
  %c1 = arith.constant 1 : index
  %i1 = arith.constant 1 : i32
  // expected-error @below {{synchronises or shares memory: its threads cannot run one by one}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
      threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %s, %ok = gpu.shuffle xor %v, %i1, %i1 : f32
    gpu.terminator
  }
  return
}

// -----

// An async launch with nothing to wait for: its token's users get a fresh
// one, and the waits go with the launches.
// CHECK-LABEL: func.func @async_without_dependencies(
// CHECK: scf.for
// CHECK-NOT: gpu.
// CHECK: return
func.func @async_without_dependencies(%m: memref<4xf32>, %v: f32) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %t = gpu.launch async blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
      threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    memref.store %v, %m[%tx] : memref<4xf32>
    gpu.terminator
  }
  gpu.wait [%t]
  return
}

// -----

// A token the host code still needs (here as a function result) cannot go.
func.func @token_in_use() -> !gpu.async.token {
  // expected-error @below {{'gpu.wait' op has a token still in use}}
  %t = gpu.wait async
  return %t : !gpu.async.token
}
