#!/usr/bin/env bash
# Configures and builds megatron-mlir into build/ (binaries in build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."

LLVM_BIN=$(llvm-config-22 --bindir)
# The CUDA target compiles and links wherever the toolkit is installed (no
# GPU needed); where it is, missing it is a configuration error, not a
# silently smaller build.
CUDA_ARGS=()
NVCC=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
if [ -n "$NVCC" ]; then
  CUDA_ARGS=(-DCMAKE_CUDA_COMPILER="$NVCC" -DMEGATRON_REQUIRE_CUDA=ON)
fi
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR="$(llvm-config-22 --cmakedir)/../mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_BIN/lit" "${CUDA_ARGS[@]}"
fi
cmake --build build -j "$(nproc)"
