#!/usr/bin/env python3
"""Draws the figures of docs/PERFORMANCE.md from benchmark outputs:
step time against TP size (ours and JAX, bench/cpu/train_compare.py --json)
and training loss curves (megatron-run --log JSON lines, e.g. the main job's
out/main/train.jsonl).

  bench/plots.py --train-compare out/bench/train_compare.json \\
      --loss-log out/main/train.jsonl --out-dir docs
needs matplotlib (pip install -r bench/requirements.txt)."""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_step_times(path, out):
    with open(path) as f:
        results = json.load(f)["results"]
    configs = sorted({r["config"] for r in results},
                     key=lambda c: [r["config"] for r in results].index(c))
    fig, axes = plt.subplots(1, len(configs), figsize=(4 * len(configs), 3.4))
    for ax, config in zip(axes if len(configs) > 1 else [axes], configs):
        rows = sorted((r for r in results if r["config"] == config and r.get("dp", 1) == 1),
                      key=lambda r: r["tp"])
        tps = [r["tp"] for r in rows]
        ax.plot(tps, [r["ours"]["step_ms"] for r in rows], "o-", label="megatron-mlir")
        ax.plot(tps, [r["jax"]["step_ms"] for r in rows], "s--", label="JAX (jit, GSPMD)")
        ax.set_title(f"GPT-2 {config}")
        ax.set_xlabel("TP size (MPI ranks / host devices)")
        ax.set_ylabel("training step (ms)")
        ax.set_xticks(tps)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.suptitle("CPU training step time, 2 cores (bench/cpu/train_compare.py)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_loss(path, out):
    train, val = [], []
    with open(path) as f:
        for line in f:
            entry = json.loads(line)
            if "val_loss" in entry:
                val.append((entry["step"], entry["val_loss"]))
            elif "loss" in entry:
                train.append((entry["step"], entry["loss"]))
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(*zip(*train), lw=0.8, label="training loss")
    if val:
        ax.plot(*zip(*val), "o-", label="validation loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per byte)")
    ax.set_title("GPT-2 4x128 at TP=2 on 2 MPI ranks (scripts/main.sh)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-compare")
    parser.add_argument("--loss-log")
    parser.add_argument("--out-dir", default="docs")
    args = parser.parse_args()
    if args.train_compare:
        plot_step_times(args.train_compare, os.path.join(args.out_dir, "cpu-step-time.png"))
    if args.loss_log:
        plot_loss(args.loss_log, os.path.join(args.out_dir, "main-loss.png"))


if __name__ == "__main__":
    main()
