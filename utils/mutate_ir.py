#!/usr/bin/env python3
"""Feeds mutated copies of an IR file to a tool and fails on any crash.

Every mutation must be either accepted (exit 0) or rejected with a
diagnostic (exit 1); a signal, another exit code or a timeout is a bug.
Mutations are drawn from a fixed seed so that a failure reproduces; the
offending input is written next to --keep-failures for the bug report.
"""
import argparse
import os
import random
import re
import subprocess
import sys

NUMBER = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")
TYPE = re.compile(r"\b(f32|bf16|f16|i32|i64|index)\b")
SHAPE = re.compile(r"tensor<[^>]*>")
REPLACEMENT_NUMBERS = ["0", "-1", "1", "3", "7", "4096", "9223372036854775807",
                       "99999999999999999999", "1.5", "-0", "65536"]
REPLACEMENT_TYPES = ["f32", "bf16", "f16", "i32", "i64", "index", "i1"]
REPLACEMENT_SHAPES = ["tensor<f32>", "tensor<?x4xf32>", "tensor<4xf32>",
                      "tensor<2x3x4x5xf32>", "tensor<0x8xf32>", "memref<4xf32>",
                      "tensor<2x32x64xi32>"]
TOKENS = ["%", "@", "{", "}", "[", "]", "<", ">", ":", ",", "=", "->", "\"",
          "tp.", "heads", "over", "dim", "#tp.sharding<@m, [[], []]>"]


def replace_random_match(rng, text, pattern, choices):
    matches = list(pattern.finditer(text))
    if not matches:
        return text
    m = rng.choice(matches)
    return text[:m.start()] + rng.choice(choices) + text[m.end():]


def mutate(rng, text):
    kind = rng.randrange(8)
    if kind == 0:  # truncation
        return text[:rng.randrange(len(text))]
    if kind == 1:
        return replace_random_match(rng, text, NUMBER, REPLACEMENT_NUMBERS)
    if kind == 2:
        return replace_random_match(rng, text, TYPE, REPLACEMENT_TYPES)
    if kind == 3:
        return replace_random_match(rng, text, SHAPE, REPLACEMENT_SHAPES)
    lines = text.split("\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    if kind == 4:  # drop a line
        del lines[i]
    elif kind == 5:  # swap two lines
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 6:  # duplicate a line
        lines.insert(j, lines[i])
    else:  # insert a stray token
        pos = rng.randrange(len(lines[i]) + 1)
        lines[i] = lines[i][:pos] + rng.choice(TOKENS) + lines[i][pos:]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("input")
    parser.add_argument("--tool", required=True)
    parser.add_argument("--tool-args", default="",
                        help="arguments after the input ('-'), space separated")
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--keep-failures", default="mutation-failure")
    args = parser.parse_args()

    text = open(args.input).read()
    rng = random.Random(args.seed)
    outcomes = {"accepted": 0, "rejected": 0}
    for n in range(args.count):
        mutated = mutate(rng, text)
        try:
            result = subprocess.run([args.tool, "-"] + args.tool_args.split(),
                                    input=mutated.encode(),
                                    capture_output=True, timeout=20)
            code = result.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
        if code not in (0, 1):
            path = f"{args.keep_failures}-{n}.mlir"
            with open(path, "w") as f:
                f.write(mutated)
            print(f"mutation {n}: {args.tool} ended with {code}; input kept in "
                  f"{path}", file=sys.stderr)
            return 1
        outcomes["accepted" if code == 0 else "rejected"] += 1
    print(f"{args.count} mutations: {outcomes['accepted']} accepted, "
          f"{outcomes['rejected']} rejected with a diagnostic, no crash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
