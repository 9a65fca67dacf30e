#!/usr/bin/env python3
"""Checks a partitioned run's outputs against JAX's.

usage: compare_outputs.py OUT EXPECTED [--tolerance T]

Both are safetensors files of result0, result1, ...: the same names and
shapes, and every element within T (default 1e-5) of JAX's, absolutely or
relative to its magnitude. Prints each result's largest difference; exits 1
on any mismatch.
"""

import argparse
import sys

import numpy as np
from safetensors.numpy import load_file


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("expected")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    opts = parser.parse_args()
    out, expected = load_file(opts.out), load_file(opts.expected)
    if sorted(out) != sorted(expected):
        sys.exit(f"results {sorted(out)}, JAX's {sorted(expected)}")
    ok = True
    for name in sorted(expected, key=lambda n: int(n[len("result"):])):
        got, want = out[name], expected[name]
        if got.shape != want.shape:
            print(f"{name}: shape {got.shape}, JAX's {want.shape}")
            ok = False
            continue
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        bound = opts.tolerance * np.maximum(1.0, np.abs(want))
        print(f"{name} {list(want.shape)} max |diff| {diff.max():.3g}")
        ok &= bool(np.all(diff <= bound))
    if not ok:
        sys.exit(f"outputs differ from JAX's by more than {opts.tolerance}")


if __name__ == "__main__":
    main()
