#!/usr/bin/env python3
"""Compares logits dumped by megatron-run --dump-logits (safetensors,
logits.<step> [B, T, V]) with the reference's --dump-logits (.npy,
[steps, B, T, Vp], padded columns included): max |ours - ref| <= rtol *
max |ref| for every step."""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "gpt2_reference"))
import numpy as np  # noqa: E402
import safetensors_io  # noqa: E402
from comparison import relative_error  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("reference")
    parser.add_argument("logits", nargs="+")
    parser.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args()
    reference = np.load(args.reference)
    worst = 0.0
    for path in args.logits:
        ours = safetensors_io.read_safetensors(path)
        for step in range(reference.shape[0]):
            got = ours.get(f"logits.{step}")
            if got is None:
                sys.exit(f"{path}: no logits.{step}")
            want = reference[step][..., :got.shape[-1]]
            if got.shape != want.shape:
                sys.exit(f"{path}: logits.{step} has shape {got.shape}, the reference {want.shape}")
            error = relative_error(got, want)
            worst = max(worst, error)
            if error > args.rtol:
                sys.exit(f"{path}: logits.{step} differ by {error:.3g} relative (> {args.rtol})")
    print(f"{len(args.logits)} logit dumps match the reference over "
          f"{reference.shape[0]} steps; worst relative difference {worst:.3g}")


if __name__ == "__main__":
    main()
