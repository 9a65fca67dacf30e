#!/usr/bin/env python3
"""Eval throughput of GPT-2 on one rank: our compiled step (megatron-run
--eval-only) beside the JAX reference (jit, fp32) in the same run, on the
same machine and threads. Prints tokens/s of each and our/JAX ratio.

  bench/cpu/eval_throughput.py [--preset 124M] [--batch 4] [--seq 64] [--steps 10]

Run scripts/build.sh first; the JAX reference comes from
utils/gpt2_reference (pip install -r utils/gpt2_reference/requirements.txt).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "utils", "gpt2_reference"))

PRESETS = {"tiny": (2, 4, 64, 512, 64), "124M": (12, 12, 768, 50257, 1024)}


def run_ours(args, workdir, tokens):
    build = os.path.join(ROOT, "build", "bin")
    mlir = os.path.join(workdir, "gpt2.mlir")
    step = os.path.join(workdir, "step.so")
    log = os.path.join(workdir, "log.jsonl")
    with open(mlir, "w") as f:
        subprocess.run([os.path.join(build, "gpt2-mlir"), f"--preset={args.preset}",
                        f"--batch={args.batch}", f"--seq={args.seq}"], stdout=f, check=True)
    subprocess.run([os.path.join(build, "megatron-compile"), mlir, "--tp=1", "-o", step],
                   check=True)
    subprocess.run([os.path.join(build, "megatron-run"), step, "--data", tokens,
                    "--eval-only", "--steps", str(args.steps + 1), "--log", log],
                   check=True, stdout=subprocess.DEVNULL)
    with open(log) as f:
        steps = [json.loads(line) for line in f]
    return statistics.median(s["ms"] for s in steps[1:]) / 1e3


def run_jax(args, tokens_path):
    import jax
    import numpy as np
    import gpt2_jax
    import tokens_io
    from make_test_data import gpt2_init
    layers, heads, embd, vocab, ctx = PRESETS[args.preset]
    params = gpt2_jax.to_jax(gpt2_init(layers, embd, vocab, ctx, seed=0))
    tokens = tokens_io.read_tokens(tokens_path)
    times = []
    for step in range(args.steps + 1):
        ids, targets = tokens_io.batch(tokens, step, args.batch, args.seq)
        start = time.perf_counter()
        loss = gpt2_jax.eval_loss(params, ids, targets, heads, vocab)
        jax.block_until_ready(loss)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="124M", choices=sorted(PRESETS))
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    import numpy as np
    import tokens_io
    vocab = PRESETS[args.preset][3]
    with tempfile.TemporaryDirectory() as workdir:
        tokens = os.path.join(workdir, "tokens.bin")
        tokens_io.write_tokens(tokens, np.random.RandomState(0).randint(
            0, vocab, size=(args.steps + 2) * args.batch * args.seq + 1))
        ours = run_ours(args, workdir, tokens)
        theirs = run_jax(args, tokens)
    per_step = args.batch * args.seq
    print(f"GPT-2 {args.preset} eval, B={args.batch} T={args.seq}, one rank, "
          f"{os.cpu_count()} cores, median of {args.steps} steps")
    print(f"  megatron-mlir: {ours * 1e3:8.1f} ms/step {per_step / ours:10.0f} tokens/s")
    print(f"  JAX (jit):     {theirs * 1e3:8.1f} ms/step {per_step / theirs:10.0f} tokens/s")
    print(f"  ours/JAX throughput ratio: {theirs / ours:.2f}")


if __name__ == "__main__":
    main()
