#!/usr/bin/env bash
# Regenerates docs/dialect: the dialect, attribute and pass references from
# tablegen (add_mlir_doc) and the pipelines from megatron-opt's registry.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build --target mlir-doc megatron-opt
python3 utils/check_docs.py build docs/dialect --update
