#!/usr/bin/env python3
"""Compares per-parameter gradients (safetensors) against a reference's,
tensor by tensor: max |ours - ref| <= rtol * max |ref|. The key section of
the fused QKV bias (h.i.attn.c_attn.bias[C:2C]) has a mathematically zero
gradient whose fp32 value is rounding noise, so there it checks only that
both are tiny against the bias's other sections."""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "gpt2_reference"))
import numpy as np  # noqa: E402
import safetensors_io  # noqa: E402
from comparison import relative_error  # noqa: E402

KEY_BIAS = re.compile(r"(^|\.)h\.\d+\.attn\.c_attn\.bias$")


def strip(name):
    return name[len("transformer."):] if name.startswith("transformer.") else name


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("reference")
    parser.add_argument("grads", nargs="+")
    parser.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args()
    reference = {strip(k): v for k, v in safetensors_io.read_safetensors(args.reference).items()}
    worst = 0.0
    for path in args.grads:
        ours = {strip(k): v for k, v in safetensors_io.read_safetensors(path).items()}
        if sorted(ours) != sorted(reference):
            sys.exit(f"{path}: tensors {sorted(set(ours) ^ set(reference))} differ from the reference's")
        for name, want in reference.items():
            got = ours[name]
            if got.shape != want.shape:
                sys.exit(f"{path}: {name} has shape {got.shape}, the reference {want.shape}")
            if KEY_BIAS.search(name):
                width = want.shape[0] // 3
                scale = np.abs(np.concatenate([want[:width], want[2 * width:]])).max()
                key = slice(width, 2 * width)
                if max(np.abs(got[key]).max(), np.abs(want[key]).max()) > args.rtol * scale:
                    sys.exit(f"{path}: {name} key section is not ~0")
                got = np.concatenate([got[:width], got[2 * width:]])
                want = np.concatenate([want[:width], want[2 * width:]])
            error = relative_error(got, want)
            worst = max(worst, error)
            if error > args.rtol:
                sys.exit(f"{path}: {name} differs from the reference by {error:.3g} "
                         f"relative to its largest entry (> {args.rtol})")
    print(f"{len(args.grads)} gradient sets match the reference over {len(reference)} "
          f"tensors; worst relative difference {worst:.3g}")


if __name__ == "__main__":
    main()
