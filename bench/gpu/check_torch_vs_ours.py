#!/usr/bin/env python3
"""Checks on the CPU that torch_gpt2.py trains the same model as our step:
both start from one checkpoint (utils/gpt2_reference/make_test_data.py,
biases and layer norms perturbed so they matter), read the same tokens, and
run 10 AdamW steps with the benchmark's hyperparameters (weight decay on 2-D
weights, clipping at 1.0) in fp32; their per-step losses and gradient norms
must agree within --rtol (seen: 8e-8 and 4e-7).

  python3 bench/gpu/check_torch_vs_ours.py [--build build] [--rtol 1e-5]

Needs torch and numpy, and the project built (gpt2-mlir, megatron-compile,
megatron-run on the CPU target).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "utils", "gpt2_reference"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import safetensors_io  # noqa: E402
import torch_gpt2  # noqa: E402

HPARAMS = ["--lr", "3e-4", "--weight-decay", "0.1", "--grad-clip", "1.0"]
STEPS = 10


def run_ours(build, tmp):
    """Our tiny CPU step trained from the checkpoint; megatron-run's log."""
    subprocess.run([sys.executable, os.path.join(ROOT, "utils", "gpt2_reference", "make_test_data.py"),
                    "--out-dir", tmp, "--layers", "2", "--heads", "4", "--embd", "64",
                    "--vocab", "512", "--ctx", "64", "--tokens", "4096", "--seed", "3"],
                   check=True, stdout=subprocess.DEVNULL)
    bin_dir = os.path.join(build, "bin")
    ir, step = os.path.join(tmp, "tiny.mlir"), os.path.join(tmp, "tiny.so")
    subprocess.run([os.path.join(bin_dir, "gpt2-mlir"), "--preset=tiny", "-o", ir], check=True)
    subprocess.run([os.path.join(bin_dir, "megatron-compile"), ir, "--target=cpu", "--train",
                    "-o", step], check=True)
    log = os.path.join(tmp, "ours.jsonl")
    subprocess.run([os.path.join(bin_dir, "megatron-run"), step, "--init-from",
                    os.path.join(tmp, "model.safetensors"), "--data", os.path.join(tmp, "tokens.bin"),
                    "--steps", str(STEPS), *HPARAMS, "--log", log],
                   check=True, stdout=subprocess.DEVNULL)
    with open(log) as f:
        return [json.loads(line) for line in f]


def run_torch(tmp):
    """torch_gpt2's model and training loop from the same checkpoint, fp32."""
    args = torch_gpt2.parse_args(["--preset", "tiny", "--batch", "2", "--seq", "32",
                                  "--steps", str(STEPS), "--warmup", "0", "--dtype", "fp32",
                                  "--device", "cpu", "--data", os.path.join(tmp, "tokens.bin"),
                                  *HPARAMS])
    device = torch.device("cpu")
    layers, heads, embd, vocab, rows, ctx = torch_gpt2.model_config(args)
    model = torch_gpt2.GPT2(layers, heads, embd, vocab, rows, ctx)
    params = safetensors_io.load_gpt2(os.path.join(tmp, "model.safetensors"))
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in params.items()})
    opt, _ = torch_gpt2.make_optimizer(model, args, device)
    batches = torch_gpt2.make_batches(args, vocab, device)
    return torch_gpt2.train(model, model, opt, batches, args, device)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rtol", type=float, default=1e-5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ours = run_ours(args.build, tmp)
        theirs = run_torch(tmp)
    worst_loss = max(abs(t[1] - o["loss"]) / abs(o["loss"]) for t, o in zip(theirs, ours))
    worst_norm = max(abs(t[2] - o["grad_norm"]) / abs(o["grad_norm"]) for t, o in zip(theirs, ours))
    ok = len(ours) == len(theirs) == STEPS and max(worst_loss, worst_norm) <= args.rtol
    print(f"torch_gpt2 vs our step, {STEPS} steps: max rel loss diff {worst_loss:.2e}, "
          f"grad norm {worst_norm:.2e}: {'OK' if ok else 'MISMATCH'} (rtol {args.rtol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
