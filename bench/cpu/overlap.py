#!/usr/bin/env python3
"""Communication hidden behind compute: the same GPT-2 training step compiled
with blocking collectives (megatron-compile --overlap-collectives=false) and
with tp-overlap-collectives' start/wait pairs (the default), run one after
the other in this invocation on the same MPI ranks and data. Prints, per
layout, the median step time and the median exposed communication per step
(megatron-run's "exposed_comm_ms": the time rank 0 spent in blocking
collectives and waits during the step), and the ratios overlapped/blocking.

  bench/cpu/overlap.py [--config 124M|cpu] [--layouts 1x2,2x1] [--steps 12]
      [--zero 0|1] [--json FILE] [--keep DIR]

--zero 1 compiles both with ZeRO-1 (megatron-compile --zero=1): the dp
gradient reduction is then reduce-scatters in buckets, which the overlapped
variant starts under the backward pass.

Both variants read the same random tokens from the same initial weights;
their losses are printed as a check that they compute the same step (they
are equal bit for bit: only the order of the waits moves). The median skips
the first 2 steps. One thread per rank (OMP_NUM_THREADS=1), ranks not bound
(mpirun --bind-to none): the cores are the ranks'.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("MEGATRON_BIN", os.path.join(ROOT, "build", "bin"))
CONFIGS = {
    "cpu": ["--layers=4", "--heads=4", "--embd=256", "--vocab=512", "--ctx=128",
            "--seq=128", "--batch=4"],
    "124M": ["--preset=124M", "--seq=64", "--batch=4"],
}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def tokens(path, vocab, count):
    # megatron-tokenize's format through the repository's own writer.
    sys.path.insert(0, os.path.join(ROOT, "utils", "gpt2_reference"))
    import tokens_io  # noqa: E402
    import random
    rng = random.Random(7)
    tokens_io.write_tokens(path, [rng.randrange(vocab) for _ in range(count)])


def measure(work, model, layout, overlap, steps, zero):
    d, t = layout
    step = os.path.join(
        work, f"{d}x{t}-zero{zero}-{'overlap' if overlap else 'blocking'}.so")
    run([os.path.join(BIN, "megatron-compile"), model, f"--dp={d}", f"--tp={t}",
         f"--zero={zero}", "--train",
         f"--overlap-collectives={'true' if overlap else 'false'}", "-o", step])
    log = step + ".jsonl"
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(d * t),
         os.path.join(BIN, "megatron-run"), step, "--data",
         os.path.join(work, "tokens.bin"), "--steps", str(steps), "--log", log],
        env=env, stdout=subprocess.DEVNULL)
    rows = [json.loads(line) for line in open(log)]
    later = rows[2:]
    return {"ms": statistics.median(r["ms"] for r in later),
            "exposed_comm_ms": statistics.median(r["exposed_comm_ms"] for r in later),
            "losses": [r["loss"] for r in rows]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="124M", choices=sorted(CONFIGS))
    parser.add_argument("--layouts", default="1x2,2x1")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--zero", type=int, default=0, choices=(0, 1))
    parser.add_argument("--json")
    parser.add_argument("--keep")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="overlap-")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "gpt2.mlir")
    run([os.path.join(BIN, "gpt2-mlir")] + CONFIGS[args.config] + ["-o", model])
    tokens(os.path.join(work, "tokens.bin"), 512 if args.config == "cpu" else 50257,
           1 << 18)
    results = []
    print(f"{args.config}, zero={args.zero}: median over steps 2..{args.steps - 1}")
    print(f"{'layout':>6} {'variant':>9} {'step ms':>9} {'exposed comm ms':>16}")
    for text in args.layouts.split(","):
        layout = tuple(int(x) for x in text.split("x"))
        blocking = measure(work, model, layout, False, args.steps, args.zero)
        overlapped = measure(work, model, layout, True, args.steps, args.zero)
        same = blocking["losses"] == overlapped["losses"]
        for name, r in (("blocking", blocking), ("overlap", overlapped)):
            print(f"{text:>6} {name:>9} {r['ms']:9.1f} {r['exposed_comm_ms']:16.2f}")
        print(f"{text:>6} {'ratio':>9} {overlapped['ms'] / blocking['ms']:9.3f} "
              f"{overlapped['exposed_comm_ms'] / max(blocking['exposed_comm_ms'], 1e-9):16.3f}"
              f"   losses {'equal' if same else 'DIFFER'}")
        results.append({"layout": text, "blocking": blocking, "overlap": overlapped,
                        "losses_equal": same})
        if not same:
            print("error: the two variants' losses differ", file=sys.stderr)
            sys.exit(1)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": args.config, "zero": args.zero,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
