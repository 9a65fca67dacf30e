#!/usr/bin/env bash
# Regenerates the figures in docs/ from the built tools (run scripts/build.sh
# first): the picture of one GPT-2 124M layer at TP=4, and, from the outputs
# that exist, the main job's loss curve (out/main/train.jsonl) and the CPU
# step times (out/bench/train_compare.json). Installs the plots' matplotlib.
set -euo pipefail
cd "$(dirname "$0")/.."

build/bin/gpt2-mlir --preset=124M |
  build/bin/megatron-opt --tp-megatron-annotate=tp=4 --tp-propagate \
    --tp-insert-conjugates --tp-view="dot=docs/gpt2-124M-layer-tp4.dot" -o /dev/null
dot -Tpng docs/gpt2-124M-layer-tp4.dot -o docs/gpt2-124M-layer-tp4.png
echo "wrote docs/gpt2-124M-layer-tp4.png"

PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q -r bench/requirements.txt
plots=()
[ -f out/main/train.jsonl ] && plots+=(--loss-log out/main/train.jsonl)
[ -f out/bench/train_compare.json ] && plots+=(--train-compare out/bench/train_compare.json)
if [ ${#plots[@]} -gt 0 ]; then
  python3 bench/plots.py "${plots[@]}" --out-dir docs
  echo "wrote the plots of ${plots[*]} into docs/"
fi
