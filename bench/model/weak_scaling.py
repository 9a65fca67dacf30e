#!/usr/bin/env python3
"""Megatron-LM's weak-scaling experiment predicted by the compiler's
performance model, beside the paper's measurements.

Shoeybi et al. 2019, Table 1 and Figure 5: GPT-2 models of 1.2B, 2.5B, 4.2B
and 8.3B parameters on 1, 2, 4 and 8 V100s of a DGX-2H (batch 8 per model
replica, sequence 1024, vocabulary 51200) keep 100, 95, 82 and 77 % of the
single-GPU throughput per GPU. For each configuration this script compiles
the training step (megatron-pipeline, tp-autodiff, tp-optimizer) and asks
tp-explain for the predicted step time on hardware figures only (the
v100-dgx2 preset: 125 TFLOP/s fp16 peak, 900 GB/s HBM2, 150 GB/s NVSwitch
links); nothing is fitted to the paper. Weak-scaling efficiency is, as in
the paper, the FLOP rate per GPU relative to the single-GPU case:
(flops_per_rank / t)(model, N GPUs) / (flops_per_rank / t)(1.2B, 1 GPU).

  bench/model/weak_scaling.py [--hardware v100-dgx2]
"""
import argparse
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")

# (name, hidden, heads, layers, GPUs, paper's weak-scaling efficiency)
CONFIGS = [
    ("1.2B", 1536, 16, 40, 1, 1.00),
    ("2.5B", 1920, 20, 54, 2, 0.95),
    ("4.2B", 2304, 24, 64, 4, 0.82),
    ("8.3B", 3072, 32, 72, 8, 0.77),
]


def predict(hidden, heads, layers, gpus, hardware):
    model = subprocess.run(
        [os.path.join(BIN, "gpt2-mlir"), f"--layers={layers}", f"--heads={heads}",
         f"--embd={hidden}", "--vocab=51200", "--ctx=1024", "--seq=1024", "--batch=8"],
        check=True, capture_output=True).stdout
    report = subprocess.run(
        [os.path.join(BIN, "megatron-opt"), f"--megatron-pipeline=tp={gpus}",
         "--tp-autodiff", "--tp-optimizer",
         f"--tp-explain=json=- hardware={hardware}", "-o", "/dev/null"],
        input=model, check=True, capture_output=True).stdout
    return json.loads(report)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hardware", default="v100-dgx2")
    args = parser.parse_args()
    rows = []
    for name, hidden, heads, layers, gpus, paper in CONFIGS:
        report = predict(hidden, heads, layers, gpus, args.hardware)
        flops = report["flops_per_rank_per_step"]
        rate = (flops["forward"] + flops["backward"]) / report["predicted"]["step_seconds"]
        rows.append((name, gpus, report["params_total"], report["predicted"], rate, paper))
    base = rows[0][4]
    print(f"weak scaling on {args.hardware} (predicted) vs Megatron-LM (measured)")
    print(f"{'model':>6} {'GPUs':>4} {'params':>14} {'step s':>8} {'comm s':>8} "
          f"{'TFLOP/s/GPU':>11} {'predicted':>9} {'paper':>6} {'error (points)':>15}")
    worst = 0.0
    for name, gpus, params, predicted, rate, paper in rows:
        efficiency = rate / base
        error = 100 * (efficiency - paper)
        worst = max(worst, abs(error))
        print(f"{name:>6} {gpus:>4} {params:>14,} {predicted['step_seconds']:8.3f} "
              f"{predicted['communication_seconds']:8.3f} {rate / 1e12:11.1f} "
              f"{100 * efficiency:8.1f}% "
              f"{100 * paper:5.0f}% {error:+15.1f}")
    print(f"largest error: {worst:.1f} points")


if __name__ == "__main__":
    main()
