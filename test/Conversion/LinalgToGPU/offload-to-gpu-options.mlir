// A block has at most 1024 threads.
// RUN: not megatron-opt %s -megatron-offload-to-gpu=block-size=2048 2>&1 | FileCheck %s
// CHECK: error: block-size must be in [1, 1024], got 2048
func.func @empty() {
  return
}
