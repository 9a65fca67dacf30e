#!/usr/bin/env bash
# Which compiler passes grow with depth: megatron-compile --train
# --mlir-timing of GPT-2 at a preset's widths (B=4, T=1024, CPU target) at
# each depth given, the passes that take at least 1 % at the deepest one.
#
#   bench/compile/pass_timing.sh [--preset 124M] [LAYERS ...]   (default 12 48)
#
# Tools come from build/bin (scripts/build.sh). depth_curve.py times the
# whole compile against depth; this says which stage the growth is in.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$ROOT/build/bin
PRESET=124M
if [[ ${1:-} == --preset ]]; then PRESET=$2; shift 2; fi
DEPTHS=(12 48)
(($#)) && DEPTHS=("$@")

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for layers in "${DEPTHS[@]}"; do
  "$BIN/gpt2-mlir" --preset="$PRESET" --layers="$layers" --batch=4 --seq=1024 -o "$WORK/g.mlir"
  "$BIN/megatron-compile" "$WORK/g.mlir" --train -o "$WORK/step.so" --mlir-timing \
    2>"$WORK/timing-$layers.txt"
done
python3 - "$WORK" "$PRESET" "${DEPTHS[@]}" <<'PY'
import datetime, re, sys
work, preset, depths = sys.argv[1], sys.argv[2], sys.argv[3:]
def passes(layers):
    # "  user (  %)  wall (  %)  Name": wall seconds by top-level name.
    times = {}
    for line in open(f"{work}/timing-{layers}.txt"):
        m = re.match(r"\s+[\d.]+ \(\s*[\d.]+%\)\s+([\d.]+) \(\s*([\d.]+)%\)  (\S.*)$", line)
        if m and not m.group(3).startswith("(A)"):
            times.setdefault(m.group(3).strip(), (float(m.group(1)), float(m.group(2))))
    return times
table = {d: passes(d) for d in depths}
deep = table[depths[-1]]
print(f"GPT-2 {preset} widths, megatron-compile --train --mlir-timing, wall seconds,"
      f" {datetime.date.today()}")
print(f"{'pass':42}" + "".join(f"{d + ' layers':>12}" for d in depths) + f"{'ratio':>8}")
for name, (secs, share) in sorted(deep.items(), key=lambda kv: -kv[1][0]):
    if share < 1.0:
        continue
    row = [table[d].get(name, (0.0, 0.0))[0] for d in depths]
    ratio = f"{row[-1] / row[0]:.1f}x" if row[0] > 0 else "-"
    print(f"{name:42}" + "".join(f"{t:12.3f}" for t in row) + f"{ratio:>8}")
PY
