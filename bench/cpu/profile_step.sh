#!/usr/bin/env bash
# Where the CPU training step's time goes: perf's per-symbol shares of
# GPT-2's step (our TP=1 step, seeded weights, two OpenMP threads), and
# the page faults of a short and a longer run (equal counts: the step loop
# allocates nothing new).
#
#   bench/cpu/profile_step.sh [--preset 124M] [--batch 4] [--seq 64]
#       [--steps 12] [--delay-ms 4000] [--top 25]
#
# Tools come from build/bin (scripts/build.sh); perf from Debian's
# linux-perf, installed here if missing. --delay-ms leaves start-up (weight
# init, first-touch page faults) out of the samples.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$ROOT/build/bin
PRESET=124M BATCH=4 SEQ=64 STEPS=12 DELAY_MS=4000 TOP=25
while [[ $# -gt 0 ]]; do
  case $1 in
    --preset) PRESET=$2 ;;
    --batch) BATCH=$2 ;;
    --seq) SEQ=$2 ;;
    --steps) STEPS=$2 ;;
    --delay-ms) DELAY_MS=$2 ;;
    --top) TOP=$2 ;;
    *) echo "profile_step.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done

if ! command -v perf >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq linux-perf >/dev/null
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$BIN/gpt2-mlir" --preset="$PRESET" --batch="$BATCH" --seq="$SEQ" -o "$WORK/g.mlir"
"$BIN/megatron-compile" "$WORK/g.mlir" --tp=1 --train -o "$WORK/step.so"
python3 - "$WORK/tokens.bin" "$((STEPS * BATCH * SEQ + 1))" "$ROOT/utils/gpt2_reference" <<'EOF'
import sys
sys.path.insert(0, sys.argv[3])
import numpy as np
import tokens_io
tokens_io.write_tokens(sys.argv[1], np.random.default_rng(0).integers(0, 50257, int(sys.argv[2])))
EOF
export OMP_NUM_THREADS=2

echo "GPT-2 $PRESET, B=$BATCH, T=$SEQ, TP=1, $(date -u +%F)"
for n in $((STEPS / 3)) $((2 * STEPS / 3)); do
  faults=$(perf stat -x, -e page-faults -- "$BIN/megatron-run" "$WORK/step.so" \
             --data "$WORK/tokens.bin" --steps "$n" 2>&1 >/dev/null | grep page-faults | cut -d, -f1)
  echo "page faults, $n steps: $faults"
done
perf record -q -o "$WORK/perf.data" -D "$DELAY_MS" -F 999 -g -- \
  "$BIN/megatron-run" "$WORK/step.so" --data "$WORK/tokens.bin" --steps "$STEPS" |
  tail -n 1
# oneDNN's GEMM kernels (AVX-512 CPUs; runtime/lib/gemm.cpp) are generated
# at run time: perf sees them as JIT
# code without symbols, so the shares by library come first ("[JIT]" is the
# GEMMs), then the named symbols.
echo "shares of the samples by library (perf report --no-children --sort dso):"
perf report -i "$WORK/perf.data" --no-children --sort dso --stdio 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -n 8 | sed 's/\[JIT\] tid [0-9]*/[JIT] (oneDNN GEMMs)/'
echo "shares of the samples by symbol (perf report --no-children --sort symbol):"
perf report -i "$WORK/perf.data" --no-children --sort symbol --stdio 2>/dev/null |
  grep -E '^ +[0-9.]+%' | grep -v '\] 0x0000' | head -n "$TOP" | sed 's/ *- *- *$//'
