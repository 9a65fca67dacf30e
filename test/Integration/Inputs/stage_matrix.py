"""Every stage's output fed to every tool.

Builds each stage of GPT-2 tiny's compilation with megatron-opt (the global
program, then each planning pass, the training step, mixed precision, the
manifest and the CPU lowering) and of a framework's linalg MLP (partitioned,
exported as shard collectives or annotations, made a function entry), then
runs every tool on every stage:
megatron-opt with each pass and pipeline, and megatron-compile. Each run must
work (exit 0) or fail with a located error (exit 1 and an "error:" that names
a file position or an IR location), within a time limit: a signal, another
exit status, an error without a location or a hang is a failure, printed
with its command.

    stage_matrix.py --tools-dir BIN --input TINY.mlir --linalg-input MLP.mlir --work DIR
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

# Each stage: its name, the stage (or input) it is made from and the passes
# that make it. GPT-2 tiny goes through the planner and the training step;
# a framework's linalg MLP through the partition pipeline and both exports.
STAGES = [
    ("global", "gpt2", []),
    ("annotated", "global", ["--tp-megatron-annotate=tp=2"]),
    ("propagated", "annotated", ["--tp-propagate"]),
    ("conjugates", "propagated", ["--tp-insert-conjugates"]),
    ("partitioned", "conjugates", ["--tp-partition"]),
    ("keep-forward", "partitioned", ["--tp-keep-forward"]),
    ("autodiff", "keep-forward", ["--tp-autodiff"]),
    ("optimizer", "autodiff", ["--tp-optimizer"]),
    ("mixed-precision", "optimizer", ["--tp-mixed-precision"]),
    ("manifest", "mixed-precision", ["--tp-step-manifest"]),
    ("lowered", "manifest", ["--megatron-lower-cpu"]),
    ("linalg", "linalg-mlp", []),
    ("linalg-partitioned", "linalg", ["--megatron-partition-pipeline"]),
    ("shard-collectives", "linalg-partitioned", ["--convert-tp-to-shard"]),
    ("shard-annotations", "linalg", ["--convert-tp-to-shard"]),
    ("linalg-function", "linalg", ["--tp-function-entry=entry=mlp"]),
]

# Every tool, as the arguments before the input file.
TOOLS = [["megatron-opt", p] for p in [
    "--tp-megatron-annotate=tp=2", "--tp-propagate", "--tp-insert-conjugates",
    "--tp-partition", "--tp-keep-forward", "--tp-autodiff", "--tp-optimizer",
    "--tp-mixed-precision", "--tp-micro-batches", "--tp-bucket-reductions",
    "--tp-export-logits", "--tp-step-manifest", "--tp-function-entry",
    "--tp-import-shard", "--megatron-expand-reshapes",
    "--tp-explain=text", "--tp-predict=tp=2", "--tp-view",
    "--convert-tp-to-runtime", "--megatron-lower-cpu",
    "--megatron-pipeline=tp=2", "--megatron-partition-pipeline",
    "--megatron-compile-pipeline=tp=2 train=true",
    "--megatron-fuse-elementwise", "--megatron-copies-to-linalg",
    "--megatron-finalize-runtime-calls", "--megatron-offload-to-gpu",
    "--megatron-gpu-launch-to-host-loops", "--megatron-lower-cuda-on-host",
    "--convert-tp-to-shard", "--convert-shard-to-tp",
]] + [
    ["megatron-compile", "--tp=2", "--emit=partitioned"],
    ["megatron-compile", "--tp=2", "--train", "--emit=lowered"],
]

# "FILE:LINE:COL: error:" or "error: loc(...)" / "error: 'op' ...": MLIR's
# located diagnostics; both tools print the first for file locations.
LOCATED = re.compile(r"(:\d+:\d+: error: )|(error: loc\()")


def tool_command(args, tool, source):
    return ([os.path.join(args.tools_dir, tool[0])] + tool[1:] +
            [source, "-o", os.devnull])


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
        return p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", ""


def build_stages(args):
    paths = {"gpt2": args.input, "linalg-mlp": args.linalg_input}
    for name, source, passes in STAGES:
        if not passes:
            paths[name] = paths[source]
            continue
        path = os.path.join(args.work, name + ".mlir")
        cmd = ([os.path.join(args.tools_dir, "megatron-opt")] + passes +
               [paths[source], "-o", path])
        rc, err = run(cmd, args.timeout)
        if rc != 0:
            sys.exit(f"stage {name} failed ({rc}): {' '.join(cmd)}\n{err}")
        paths[name] = path
    return {name: paths[name] for name, _, _ in STAGES}


def verdict(rc, err):
    if rc == 0:
        return "works"
    if rc == 1 and LOCATED.search(err):
        return "located error"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools-dir", required=True,
                    help="where megatron-opt and megatron-compile are")
    ap.add_argument("--input", required=True, help="GPT-2 tiny (gpt2-mlir)")
    ap.add_argument("--linalg-input", required=True,
                    help="a linalg program with tp.sharding arguments")
    ap.add_argument("--work", required=True)
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    stages = build_stages(args)
    runs = [(stage, tool) for stage in stages for tool in TOOLS]
    counts, failures = {"works": 0, "located error": 0}, []
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        results = pool.map(
            lambda r: run(tool_command(args, r[1], stages[r[0]]), args.timeout),
            runs)
        for (stage, tool), (rc, err) in zip(runs, results):
            v = verdict(rc, err)
            if v:
                counts[v] += 1
                continue
            cmd = " ".join(tool_command(args, tool, stages[stage]))
            failures.append(f"FAIL {stage} -> {' '.join(tool)}: exit {rc}\n"
                            f"  $ {cmd}\n  " + err.strip().replace("\n", "\n  "))
    for f in failures:
        print(f)
    print(f"{len(stages)} stages x {len(TOOLS)} tools: {counts['works']} work, "
          f"{counts['located error']} located errors, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
