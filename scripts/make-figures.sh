#!/usr/bin/env bash
# Regenerates the figures in docs/ from the built tools (run scripts/build.sh
# first): the picture of one GPT-2 124M layer at TP=4.
set -euo pipefail
cd "$(dirname "$0")/.."

build/bin/gpt2-mlir --preset=124M |
  build/bin/megatron-opt --tp-megatron-annotate=tp=4 --tp-propagate \
    --tp-insert-conjugates --tp-view="dot=docs/gpt2-124M-layer-tp4.dot" -o /dev/null
dot -Tpng docs/gpt2-124M-layer-tp4.dot -o docs/gpt2-124M-layer-tp4.png
echo "wrote docs/gpt2-124M-layer-tp4.png"
