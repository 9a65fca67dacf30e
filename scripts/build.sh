#!/usr/bin/env bash
# Configures and builds megatron-mlir into build/ (binaries in build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."

LLVM_BIN=$(llvm-config-22 --bindir)
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR="$(llvm-config-22 --cmakedir)/../mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_BIN/lit"
fi
cmake --build build -j "$(nproc)"
