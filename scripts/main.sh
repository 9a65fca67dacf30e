#!/usr/bin/env bash
# The main job. Until the CPU lowering lands it generates GPT-2 124M, checks
# that megatron-opt parses and verifies it, and prints its parameter count.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/build.sh
mkdir -p out
build/bin/gpt2-mlir --preset=124M -o out/gpt2-124M.mlir
build/bin/megatron-opt out/gpt2-124M.mlir -o /dev/null
echo "GPT-2 124M IR: out/gpt2-124M.mlir ($(wc -l < out/gpt2-124M.mlir) lines)"
build/bin/gpt2-mlir --preset=124M --print-params | tail -n 1
