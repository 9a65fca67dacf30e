#!/usr/bin/env bash
# The main job: installs and builds, compiles a CPU-sized GPT-2 (or, with
# --model llama, a Llama of the same size) with tensor parallelism 2 into a
# training step, and trains it on two MPI ranks on byte-level text
# (Python's own standard-library sources), printing the falling loss and a
# validation loss; then compiles the same model's generation step at TP=2
# and continues three prompts with the trained weights.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=gpt2
case "${1:-}" in
  "") ;;
  --model=gpt2|--model=llama) MODEL=${1#--model=} ;;
  *) echo "usage: scripts/main.sh [--model=gpt2|--model=llama]" >&2; exit 2 ;;
esac

scripts/install-deps.sh
scripts/build.sh

# GPT-2's files under out/main (its loss curve is docs/main-loss.png), the
# Llama's under out/main-llama.
OUT=out/main
[ "$MODEL" = gpt2 ] || OUT=out/main-$MODEL
mkdir -p "$OUT"
# 4 MiB of the standard library's sources to train on, 64 KiB to validate.
python3 utils/make_text_tokens.py --out-dir "$OUT" --train-bytes 4194304 --val-bytes 65536
# 4 layers, 4 heads, width 128, byte vocabulary, 128-token sequences: in
# three minutes on two cores the model that sees the most tokens does best
# (wider or deeper ones see fewer; docs/PERFORMANCE.md, "The main job").
# The Llama has 2 key/value heads and a SwiGLU of width 352 (8/3 of 128,
# rounded up to a multiple of 32, as Llama rounds its own).
if [ "$MODEL" = gpt2 ]; then
  GENERATOR=(build/bin/gpt2-mlir --layers=4 --heads=4 --embd=128 --vocab=256 --ctx=128)
else
  GENERATOR=(build/bin/llama-mlir --layers=4 --heads=4 --kv-heads=2 --embd=128
             --ffn=352 --vocab=256 --ctx=128)
fi
"${GENERATOR[@]}" --seq=128 --batch=4 -o "$OUT/model.mlir"
build/bin/megatron-compile "$OUT/model.mlir" --tp=2 --train -o "$OUT/step.so"
build/bin/megatron-opt "$OUT/model.mlir" --megatron-pipeline=tp=2 --tp-autodiff \
  --tp-explain=text=true -o /dev/null

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# This machine's GEMM rate per core and on all its cores: the peak of each
# step line's model FLOPs utilisation ("mfu") is that of the cores the two
# ranks use (megatron-run gives each rank its share of the cores).
python3 bench/cpu/measure_hardware.py --out "$OUT/hardware.json" > /dev/null
mpirun --oversubscribe -np 2 build/bin/megatron-run "$OUT/step.so" \
  --data "$OUT/train.bin" --val-data "$OUT/val.bin" --val-every 1000 --val-steps 16 \
  --steps 6500 --lr 2e-3 --lr-schedule cosine --warmup-steps 100 --min-lr 1e-4 \
  --weight-decay 0.1 --grad-clip 1.0 --log "$OUT/train.jsonl" \
  --hardware "$OUT/hardware.json" --save "$OUT/checkpoint.safetensors"
# The loss curve: docs/main-loss.png for GPT-2, beside the log otherwise.
PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q -r bench/requirements.txt
PLOTS=docs
[ "$MODEL" = gpt2 ] || PLOTS=$OUT
python3 bench/plots.py --loss-log "$OUT/train.jsonl" --out-dir "$PLOTS"

# Generation from the trained checkpoint: prefill in chunks of 32 tokens,
# three sequences decoded together, each rank keeping the KV cache of its
# two heads. Prompt and continuation stay within the 128 positions trained.
"${GENERATOR[@]}" --seq=32 --batch=3 --generate -o "$OUT/generate.mlir"
build/bin/megatron-compile "$OUT/generate.mlir" --tp=2 --generate \
  -o "$OUT/generate.so"
printf 'def \nimport \nclass \n' > "$OUT/prompts.txt"
echo "Samples from the trained model (temperature 0.8, top-k 40):"
mpirun --oversubscribe -np 2 build/bin/megatron-run "$OUT/generate.so" \
  --generate --init-from "$OUT/checkpoint.safetensors" \
  --prompts-file "$OUT/prompts.txt" --max-new 120 --temperature 0.8 \
  --top-k 40 --seed 1
