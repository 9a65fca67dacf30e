"""One tp-predict row for a GPT-2-shaped model at global shapes, shared by
the scaling benchmarks: gpt2-mlir writes the program once per model and
batch, megatron-opt --tp-predict partitions a copy for (tp, dp) and prints
the performance model's step time and FLOP rate per GPU."""
import os
import re
import subprocess
import sys

ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)"
                 r"\s+([0-9.]+)\s+([0-9.]+)\s*$")


def predict(build, hardware, work, *, hidden, heads, layers, vocab, seq,
            batch, tp, dp, overlap=(), recompute=False):
    """(step seconds, TFLOP/s per GPU) for one layout; `batch` is the global
    batch of one step, `overlap` the axes whose collectives run under
    compute (tp-predict's overlap), `recompute` whether each layer's forward
    runs again before its backward (tp-predict's recompute)."""
    ir = os.path.join(work, f"gpt2-{hidden}-{layers}-{vocab}-{seq}-{batch}.mlir")
    if not os.path.exists(ir):
        subprocess.run([os.path.join(build, "bin", "gpt2-mlir"),
                        f"--layers={layers}", f"--heads={heads}",
                        f"--embd={hidden}", f"--vocab={vocab}",
                        f"--ctx={seq}", f"--seq={seq}", f"--batch={batch}",
                        "-o", ir], check=True)
    options = f"tp={tp} dp={dp} hardware={hardware}"
    if overlap:
        options += " overlap=" + ",".join(overlap)
    if recompute:
        options += " recompute=true"
    out = subprocess.run(
        [os.path.join(build, "bin", "megatron-opt"), ir,
         f"--tp-predict={options}", "-o", os.devnull],
        check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = ROW.match(line)
        if m and int(m.group(1)) == tp and int(m.group(2)) == dp:
            return float(m.group(3)), float(m.group(7))
    sys.exit(f"no prediction for tp={tp} dp={dp}:\n{out}")
