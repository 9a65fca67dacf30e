#!/usr/bin/env bash
# Configures and builds megatron-mlir into build/ (binaries in build/bin).
# With --sanitize: the ASan + UBSan build, with clang-22, into
# build-sanitize/ (the CUDA runtime left out: nvcc takes no sanitizers).
set -euo pipefail
cd "$(dirname "$0")/.."

LLVM_BIN=$(llvm-config-22 --bindir)
# ccache keys on paths relative to the checkout, so that a clone elsewhere
# (CI's clean clone) reuses what this one compiled.
export CCACHE_BASEDIR="$PWD"
BUILD_DIR=build
EXTRA_ARGS=()
if [ "${1:-}" = "--sanitize" ]; then
  BUILD_DIR=build-sanitize
  EXTRA_ARGS=(-DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22
              -DMEGATRON_SANITIZE=ON -DMEGATRON_ENABLE_CUDA=OFF)
else
  # The CUDA target compiles and links wherever the toolkit is installed (no
  # GPU needed); where it is, missing it is a configuration error, not a
  # silently smaller build.
  NVCC=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
  if [ -n "$NVCC" ]; then
    EXTRA_ARGS=(-DCMAKE_CUDA_COMPILER="$NVCC" -DMEGATRON_REQUIRE_CUDA=ON)
  fi
fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR="$(llvm-config-22 --cmakedir)/../mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_BIN/lit" "${EXTRA_ARGS[@]}"
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
