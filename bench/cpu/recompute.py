#!/usr/bin/env python3
"""Activation recomputation's trade on this machine: the same GPT-2 training
step compiled keeping every activation (megatron-compile --train) and
recomputing each layer's forward before its backward (--recompute), run one
after the other in this invocation on one rank and the same data. Prints,
per variant, the peak resident memory of the megatron-run process
(the child's ru_maxrss from wait4), the median step time, and the
recomputed/kept ratios; and tp-explain's activation bytes beside them.

  bench/cpu/recompute.py [--seq 512] [--batch 4] [--steps 5] [--json FILE]

GPT-2 124M widths. Both variants read the same random tokens from the same
initial weights, and their losses must be equal bit for bit (the recomputed
forward runs the same kernels on the same inputs). The median skips the
first step. Two BLAS threads (the machine's cores).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("MEGATRON_BIN", os.path.join(ROOT, "build", "bin"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overlap import run, tokens  # noqa: E402


def explained_activations(model, recompute):
    """tp-explain's activation bytes of the training step."""
    passes = "--tp-autodiff" + (" --tp-recompute-layers" if recompute else "")
    out = subprocess.run(
        [os.path.join(BIN, "megatron-opt"), model, "--megatron-pipeline=tp=1",
         *passes.split(), "--tp-optimizer", "--tp-explain=json=-",
         "-o", os.devnull], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["bytes_per_rank"]["activations"]


def measure(work, model, recompute, steps):
    name = "recomputed" if recompute else "kept"
    step = os.path.join(work, f"{name}.so")
    run([os.path.join(BIN, "megatron-compile"), model, "--train", "-o", step]
        + (["--recompute"] if recompute else []))
    log = step + ".jsonl"
    child = subprocess.Popen(
        [os.path.join(BIN, "megatron-run"), step, "--data",
         os.path.join(work, "tokens.bin"), "--steps", str(steps), "--log", log],
        env=dict(os.environ, OMP_NUM_THREADS="2"), stdout=subprocess.DEVNULL)
    # This child's own peak (RUSAGE_CHILDREN would be the largest so far).
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        sys.exit(f"megatron-run {step} failed: wait status {status}")
    peak_kb = usage.ru_maxrss
    rows = [json.loads(line) for line in open(log)]
    return {"peak_rss_bytes": peak_kb * 1024,
            "ms": statistics.median(r["ms"] for r in rows[1:]),
            "losses": [r["loss"] for r in rows],
            "explained_activation_bytes": explained_activations(model, recompute)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="recompute-") as work:
        model = os.path.join(work, "gpt2.mlir")
        run([os.path.join(BIN, "gpt2-mlir"), "--preset=124M", f"--seq={args.seq}",
             f"--batch={args.batch}", "-o", model])
        tokens(os.path.join(work, "tokens.bin"), 50257, 1 << 20)
        kept = measure(work, model, False, args.steps)
        recomputed = measure(work, model, True, args.steps)
    print(f"124M, B={args.batch}, T={args.seq}, one rank: median over steps "
          f"1..{args.steps - 1}")
    print(f"{'variant':>10} {'peak RSS MB':>12} {'step ms':>9} {'explained activations MB':>25}")
    for name, r in (("kept", kept), ("recomputed", recomputed)):
        print(f"{name:>10} {r['peak_rss_bytes'] / 1e6:12.0f} {r['ms']:9.1f} "
              f"{r['explained_activation_bytes'] / 1e6:25.0f}")
    same = kept["losses"] == recomputed["losses"]
    print(f"{'ratio':>10} {recomputed['peak_rss_bytes'] / kept['peak_rss_bytes']:12.3f} "
          f"{recomputed['ms'] / kept['ms']:9.3f} "
          f"{recomputed['explained_activation_bytes'] / kept['explained_activation_bytes']:25.3f}"
          f"   losses {'equal' if same else 'DIFFER'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seq": args.seq, "batch": args.batch, "kept": kept,
                       "recomputed": recomputed, "losses_equal": same}, f, indent=1)
    if not same:
        sys.exit("error: the two variants' losses differ")


if __name__ == "__main__":
    main()
