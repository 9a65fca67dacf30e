#!/usr/bin/env python3
"""Compares `step S loss X` logs (and `grad_norm G` when present) against a
reference log within a relative tolerance; exits 1 naming the first
mismatch. Used by the integration tests: the reference is the JAX GPT-2."""
import argparse
import re
import sys

from comparison import relative_error

LINE = re.compile(r"^step (\d+) loss (\S+)(?: grad_norm (\S+))?")


def read_log(path):
    values = {}
    with open(path) as f:
        for line in f:
            m = LINE.match(line.strip())
            if m:
                values[int(m.group(1))] = [float(v) for v in m.groups()[1:] if v]
    if not values:
        sys.exit(f"{path}: no 'step S loss X' lines")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("reference")
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args()
    reference = read_log(args.reference)
    worst = 0.0
    for path in args.logs:
        log = read_log(path)
        if sorted(log) != sorted(reference):
            sys.exit(f"{path}: steps {sorted(log)} differ from the reference's {sorted(reference)}")
        for step, expected in reference.items():
            for name, want, got in zip(("loss", "grad_norm"), expected, log[step]):
                error = relative_error(got, want)
                worst = max(worst, error)
                if error > args.rtol:
                    sys.exit(f"{path}: step {step} {name} {got!r} differs from the "
                             f"reference {want!r} by {error:.3g} relative (> {args.rtol})")
    print(f"{len(args.logs)} logs match the reference over {len(reference)} steps; "
          f"worst relative difference {worst:.3g}")


if __name__ == "__main__":
    main()
