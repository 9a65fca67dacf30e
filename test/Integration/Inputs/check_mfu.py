#!/usr/bin/env python3
"""Recomputes each logged step's MFU from what it is made of: the step
entry's FLOPs per rank (the manifest), the ranks, the step's time (the log)
and the peak of the cores the job used (the hardware file's per-core rate
times the threads on the node, at most its cores, or its whole-machine
rate when it was measured on that many), and compares it with the MFU
megatron-run logged. A step that computes in bf16 (the manifest's
"compute") is held against the bf16 rates ("bf16_" fields). The ranks run
on this one machine.

  check_mfu.py MANIFEST.json LOG.jsonl HARDWARE.json RANKS THREADS_PER_RANK
"""
import json
import sys


def main():
    manifest, log, hardware = (json.load(open(sys.argv[1])),
                               [json.loads(line) for line in open(sys.argv[2])],
                               json.load(open(sys.argv[3])))
    ranks = int(sys.argv[4])
    threads = min(ranks * int(sys.argv[5]), hardware["cores"])
    prefix = "bf16_" if manifest.get("compute") == "bf16" else ""
    if hardware.get("threads") == threads:
        peak = hardware[prefix + "flops_per_second"]
    else:
        peak = hardware[prefix + "flops_per_second_per_core"] * threads
    flops = manifest["flops"]["train_step"] * ranks
    steps = [r for r in log if "mfu" in r]
    # The log rounds the MFU to 4 decimals and the time to 3 (milliseconds):
    # the figure recomputed from the rounded time may differ by that much.
    within = all(
        abs(r["mfu"] - expected) <= 5e-5 + expected * 5e-4 / r["ms"] + 1e-9
        for r in steps
        for expected in [flops / (r["ms"] / 1e3) / peak])
    print(f"{len(steps)} steps' mfu recomputed, "
          f"{'within' if within else 'beyond'} the log's rounding")


if __name__ == "__main__":
    main()
