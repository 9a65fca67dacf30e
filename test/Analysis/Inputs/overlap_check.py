#!/usr/bin/env python3
"""Compares two tp-predict tables of one layout, its collectives blocking
and overlapped (overlap=...): the same compute, memory and communication;
the overlapped step shorter, but never shorter than its compute and memory
traffic, which nothing hides."""
import re
import sys

ROW = re.compile(r"^\s*\d+\s+\d+\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+\s*$")


def row(path):
    for line in open(path):
        m = ROW.match(line)
        if m:
            return [float(v) for v in m.groups()]
    sys.exit(f"{path}: no prediction row")


inline, overlap = row(sys.argv[1]), row(sys.argv[2])
if inline[1:] != overlap[1:]:
    sys.exit(f"compute, memory and comm differ: {inline[1:]} and {overlap[1:]}")
step, compute, memory, comm = overlap
if not compute + memory <= step < inline[0]:
    sys.exit(f"overlapped step {step} not in [{compute + memory}, {inline[0]})")
print(f"overlap hides {inline[0] - step:.4f} of {comm:.4f} s of communication")
