// A function whose plan needs no collective (its weight split by columns,
// its result left split) still runs under megatron-run: its library links
// the runtime, which megatron-run finds through it, though the generated
// code calls none of it.
// RUN: rm -rf %t && mkdir -p %t
// RUN: megatron-compile %s --entry=main -o %t/mm.so
// RUN: %python -c "import numpy as np; from safetensors.numpy import save_file; x = np.arange(32, dtype=np.float32).reshape(4, 8) / 8; w = np.arange(48, dtype=np.float32).reshape(8, 6) / 16; save_file({'arg0': x, 'arg1': w}, '%t/in.safetensors'); save_file({'result0': x @ w}, '%t/expected.safetensors')"
// RUN: %mpirun 2 megatron-run %t/mm.so --entry main --inputs %t/in.safetensors --outputs %t/out.safetensors 2>&1 | FileCheck %s
// CHECK: megatron-run: wrote 1 outputs of main to {{.*}}out.safetensors
// RUN: %python %S/../Frontend/Inputs/compare_outputs.py %t/out.safetensors %t/expected.safetensors

tp.mesh @mesh axes = ["tp" = 2]
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x6xf32> {tp.sharding = #tp.sharding<@mesh, [[], ["tp"]]>}) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x6xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x6xf32>) -> tensor<4x6xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%init : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}
