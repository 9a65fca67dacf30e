#!/usr/bin/env python3
"""Compile time and peak memory of our tensor-parallel pipeline beside LLVM
22's upstream sharding passes, and the per-rank communication each plan
implies.

For each GPT-2 preset (gpt2-mlir --preset, B=4 T=64 unless --batch/--seq):

  ours:     megatron-opt gpt2.mlir --megatron-pipeline=tp=N --tp-autodiff
            --tp-optimizer -o out.mlir
            (the whole training step: forward, backward, AdamW)
  upstream: mlir-opt-22 mlp.mlir --pass-pipeline="builtin.module(func.func(
            sharding-propagation,shard-partition))" -o out.mlir
            on an MLP stack of the preset's depth and widths written in linalg
            and shard (forward only; generated here): per layer
              H = X[B*T,C] . A[C,4C];  G = tanh(H);  Y = X + G . B[4C,C]
            on shard.grid @grid(shape = N), with only each A annotated
            column-split (shard.sharding split_axes = [[], [0]]). As in
            test/Upstream/Inputs/shard-mlp.mlir the accumulator of G . B is a
            function argument (with tensor.empty + linalg.fill there LLVM
            22's shard-partition crashes); the residual is a separate
            elementwise add.

Both run under `/usr/bin/time -f "%e %M"` (wall seconds, peak resident KiB),
--repeat times each; reported are the median wall time (measured around the
run with time.perf_counter, as %e has only 10 ms resolution; the %e values are
in the JSON) and the largest peak. Each tool's time and peak on an empty
module (loading the binary) are printed too, and the memory ratio above that.

N is the largest of {8, 5, 4} that divides the preset's heads (124M: 12
heads -> 4, 774M: 20 -> 5, 1558M: 25 -> 5) unless --tp is given; upstream
gets a grid of the same size.

Communication per rank per step, in f32 elements (one collective counts the
elements of its local operand; an all-gather counts its gathered result; no
ring factor), same convention as tp-explain:
  ours:     comm_elements_per_rank_per_step of --tp-explain=json=- (forward
            and backward, attention and the vocabulary-parallel loss included),
            and its forward part alone
  upstream: shard.all_reduce / all_gather / reduce_scatter / all_to_all ops of
            the partitioned output and their tensor sizes (forward only, MLP
            only: there is no attention, loss or backward pass upstream)

  bench/compile/compile_time.py [--presets 124M,774M,1558M] [--tp N]
      [--repeat 5] [--batch 4] [--seq 64] [--json FILE] [--keep DIR]

Nothing is built here: the tools come from build/bin (scripts/build.sh) and
/usr/lib/llvm-22/bin/mlir-opt (mlir-opt-22).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")
UPSTREAM_PIPELINE = "builtin.module(func.func(sharding-propagation,shard-partition))"
TP_CHOICES = (8, 5, 4)
ALL_PRESETS = ("124M", "774M", "1558M")


def upstream_mlir_opt():
    for candidate in ("/usr/lib/llvm-22/bin/mlir-opt", shutil.which("mlir-opt-22")):
        if candidate and os.path.exists(candidate):
            return candidate
    sys.exit("mlir-opt-22 not found (/usr/lib/llvm-22/bin/mlir-opt)")


def timed(cmd, repeat):
    """Run cmd `repeat` times under /usr/bin/time -f "%e %M". Returns
    {"seconds": median wall (perf_counter around the run, ms resolution),
    "seconds_all", "time_e_all": /usr/bin/time's %e (10 ms resolution),
    "peak_kib": largest %M}."""
    walls, elapsed, peaks = [], [], []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M"] + cmd,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        walls.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        line = [l for l in proc.stderr.splitlines() if l.startswith("TIME ")][-1]
        wall, peak = line.split()[1:3]
        elapsed.append(float(wall))
        peaks.append(int(peak))
    return {"seconds": statistics.median(walls), "seconds_all": walls,
            "time_e_all": elapsed, "peak_kib": max(peaks)}


def model_shape(mlir_text):
    """(layers, heads, embd, batch, seq) of gpt2-mlir output."""
    layers = len(set(re.findall(r'tp\.name = "h\.(\d+)\.ln_1\.weight"', mlir_text)))
    heads = int(re.search(r"heads = (\d+)", mlir_text).group(1))
    # Other attributes (tp.init) may come before the name.
    embd = int(re.search(r'tensor<\d+x(\d+)xf32> \{[^}]*tp\.name = "wte\.weight"',
                         mlir_text).group(1))
    batch, seq = map(int, re.search(
        r'tensor<(\d+)x(\d+)xi32> \{[^}]*tp\.name = "input_ids"', mlir_text).groups())
    return layers, heads, embd, batch, seq


def mlp_stack(layers, rows, width, grid):
    """The upstream linalg + shard MLP stack (see the docstring)."""
    hidden = 4 * width

    def t(a, b):
        return f"tensor<{a}x{b}xf32>"
    ew2 = ('indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], '
           'iterator_types = ["parallel", "parallel"]')
    ew3 = ('indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, '
           'affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]')
    args = [f"%x: {t(rows, width)}"] + [
        f"%a{i}: {t(width, hidden)}, %b{i}: {t(hidden, width)}, %acc{i}: {t(rows, width)}"
        for i in range(layers)]
    out = [f"// {layers}-layer MLP stack, X [{rows},{width}], A [{width},{hidden}] column-split "
           f"on a grid of {grid}; generated by bench/compile/compile_time.py",
           f"shard.grid @grid(shape = {grid})",
           f"func.func @mlp_stack({', '.join(args)}) -> {t(rows, width)} {{",
           "  %zero = arith.constant 0.0 : f32",
           "  %col = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding"]
    x = "%x"
    for i in range(layers):
        out += [
            f"  %as{i} = shard.shard %a{i} to %col : {t(width, hidden)}",
            f"  %he{i} = tensor.empty() : {t(rows, hidden)}",
            f"  %h0{i} = linalg.fill ins(%zero : f32) outs(%he{i} : {t(rows, hidden)}) -> {t(rows, hidden)}",
            f"  %h{i} = linalg.matmul ins({x}, %as{i} : {t(rows, width)}, {t(width, hidden)}) "
            f"outs(%h0{i} : {t(rows, hidden)}) -> {t(rows, hidden)}",
            f"  %ge{i} = tensor.empty() : {t(rows, hidden)}",
            f"  %g{i} = linalg.generic {{{ew2}}} ins(%h{i} : {t(rows, hidden)}) "
            f"outs(%ge{i} : {t(rows, hidden)}) {{",
            "  ^bb0(%in: f32, %out: f32):",
            "    %th = math.tanh %in : f32",
            "    linalg.yield %th : f32",
            f"  }} -> {t(rows, hidden)}",
            f"  %p{i} = linalg.matmul ins(%g{i}, %b{i} : {t(rows, hidden)}, {t(hidden, width)}) "
            f"outs(%acc{i} : {t(rows, width)}) -> {t(rows, width)}",
            f"  %ye{i} = tensor.empty() : {t(rows, width)}",
            f"  %y{i} = linalg.generic {{{ew3}}} ins(%p{i}, {x} : {t(rows, width)}, {t(rows, width)}) "
            f"outs(%ye{i} : {t(rows, width)}) {{",
            "  ^bb0(%u: f32, %v: f32, %out: f32):",
            "    %s = arith.addf %u, %v : f32",
            "    linalg.yield %s : f32",
            f"  }} -> {t(rows, width)}"]
        x = f"%y{i}"
    out += [f"  return {x} : {t(rows, width)}", "}", ""]
    return "\n".join(out)


def numel(tensor_type):
    dims = re.match(r"tensor<([0-9x]*)x?[a-z]+\d*>", tensor_type).group(1)
    n = 1
    for d in filter(None, dims.split("x")):
        n *= int(d)
    return n


COLLECTIVE = re.compile(r"shard\.(all_reduce|all_gather|reduce_scatter|all_to_all|broadcast|"
                        r"gather|scatter|reduce|send|recv|shift|permute)\b.*?:\s*"
                        r"(tensor<[^>]*>)\s*->\s*(tensor<[^>]*>)")


def upstream_comm(partitioned):
    """{kind: {"count", "elements"}} and the total over the partitioned text.
    all_gather counts its result, the others their operand."""
    kinds = {}
    for match in COLLECTIVE.finditer(partitioned):
        kind, operand, result = match.groups()
        elements = numel(result if kind == "all_gather" else operand)
        entry = kinds.setdefault(kind, {"count": 0, "elements": 0, "shapes": {}})
        entry["count"] += 1
        entry["elements"] += elements
        shape = f"{operand} -> {result}"
        entry["shapes"][shape] = entry["shapes"].get(shape, 0) + 1
    return kinds, sum(e["elements"] for e in kinds.values())


def ours_comm(mlir, tp):
    report = json.loads(subprocess.run(
        [os.path.join(BIN, "megatron-opt"), mlir, f"--megatron-pipeline=tp={tp}",
         "--tp-autodiff", "--tp-optimizer", "--tp-explain=json=-", "-o", "/dev/null"],
        check=True, capture_output=True, text=True).stdout)
    forward = sum(c["elements"] * c["count"] for c in report["collectives"]
                  if c["direction"] == "forward")
    return report, forward


def pick_tp(heads, override):
    if override:
        if heads % override:
            sys.exit(f"--tp={override} does not divide {heads} heads")
        return override
    for tp in sorted(TP_CHOICES, reverse=True):
        if heads % tp == 0:
            return tp
    sys.exit(f"no TP in {TP_CHOICES} divides {heads} heads")


def run_preset(preset, args, workdir, upstream):
    mlir = os.path.join(workdir, f"gpt2-{preset}.mlir")
    gen = [os.path.join(BIN, "gpt2-mlir"), f"--preset={preset}", "-o", mlir]
    if args.batch:
        gen.append(f"--batch={args.batch}")
    if args.seq:
        gen.append(f"--seq={args.seq}")
    subprocess.run(gen, check=True)
    with open(mlir) as f:
        layers, heads, embd, batch, seq = model_shape(f.read())
    tp = pick_tp(heads, args.tp)

    ours_out = os.path.join(workdir, f"ours-{preset}-tp{tp}.mlir")
    ours_cmd = [os.path.join(BIN, "megatron-opt"), mlir, f"--megatron-pipeline=tp={tp}",
                "--tp-autodiff", "--tp-optimizer", "-o", ours_out]
    ours = timed(ours_cmd, args.repeat)
    report, ours_fwd = ours_comm(mlir, tp)

    mlp = os.path.join(workdir, f"mlp-{preset}-grid{tp}.mlir")
    with open(mlp, "w") as f:
        f.write(mlp_stack(layers, batch * seq, embd, tp))
    up_out = os.path.join(workdir, f"upstream-{preset}-grid{tp}.mlir")
    up_cmd = [upstream, mlp, f"--pass-pipeline={UPSTREAM_PIPELINE}", "-o", up_out]
    up = timed(up_cmd, args.repeat)
    with open(up_out) as f:
        up_kinds, up_total = upstream_comm(f.read())

    ours.update({
        "command": " ".join([os.path.basename(ours_cmd[0]), os.path.basename(mlir)]
                            + ours_cmd[2:-2]),
        "program": "GPT-2 training step (forward, backward, AdamW)",
        "comm_elements_per_rank_per_step": report["comm_elements_per_rank_per_step"],
        "comm_elements_forward": ours_fwd,
        "collectives": report["collectives"],
        "conjugates": report.get("conjugates")})
    up.update({
        "command": f"mlir-opt-22 {os.path.basename(mlp)} --pass-pipeline=\"{UPSTREAM_PIPELINE}\"",
        "program": "linalg MLP stack, forward only",
        "comm_elements_forward": up_total, "collectives": up_kinds})
    return {"preset": preset, "layers": layers, "heads": heads, "embd": embd,
            "batch": batch, "seq": seq, "tp": tp, "ours": ours, "upstream": up}


def baselines(upstream, workdir, repeat):
    """Peak memory and time of each tool on an empty module (what loading the
    binary costs)."""
    empty = os.path.join(workdir, "empty.mlir")
    with open(empty, "w") as f:
        f.write("module {}\n")
    return {"ours": timed([os.path.join(BIN, "megatron-opt"), empty, "-o", os.devnull], repeat),
            "upstream": timed([upstream, empty, "-o", os.devnull], repeat)}


def ratio(a, b):
    return a / b if b else float("nan")


def print_table(rows, base, repeat):
    print(f"compile: median wall of {repeat} runs, peak RSS from /usr/bin/time %M; "
          f"communication in f32 elements per rank per step")
    print("  ours     = megatron-opt --megatron-pipeline=tp=N --tp-autodiff --tp-optimizer "
          "(GPT-2 training step)")
    print("  upstream = mlir-opt-22 sharding-propagation,shard-partition "
          "(linalg MLP stack of the same depth/widths, forward only)")
    print(f"  empty module: ours {base['ours']['seconds']:.3f} s "
          f"{base['ours']['peak_kib'] / 1024:.1f} MB, upstream "
          f"{base['upstream']['seconds']:.3f} s {base['upstream']['peak_kib'] / 1024:.1f} MB")
    print(f"{'model':>6} {'L':>3} {'C':>5} {'N':>2} | {'ours s':>7} {'ours MB':>8} | "
          f"{'upstr s':>7} {'upstr MB':>8} | {'time o/u':>8} {'mem o/u':>7} "
          f"{'mem>empty o/u':>13}")
    for r in rows:
        o, u = r["ours"], r["upstream"]
        extra_o = o["peak_kib"] - base["ours"]["peak_kib"]
        extra_u = u["peak_kib"] - base["upstream"]["peak_kib"]
        print(f"{r['preset']:>6} {r['layers']:>3} {r['embd']:>5} {r['tp']:>2} | "
              f"{o['seconds']:7.3f} {o['peak_kib'] / 1024:8.1f} | "
              f"{u['seconds']:7.3f} {u['peak_kib'] / 1024:8.1f} | "
              f"{ratio(o['seconds'], u['seconds']):8.2f} {ratio(o['peak_kib'], u['peak_kib']):7.2f} "
              f"{ratio(extra_o, extra_u) if extra_u > 0 else float('nan'):13.2f}")
    print()
    print(f"{'model':>6} {'N':>2} | {'ours fwd+bwd':>13} {'ours fwd':>11} | {'upstream fwd':>13} "
          f"| {'upstr/ours fwd':>14} | upstream collectives")
    for r in rows:
        o, u = r["ours"], r["upstream"]
        kinds = ", ".join(f"{k} x{v['count']}" for k, v in sorted(u["collectives"].items()))
        print(f"{r['preset']:>6} {r['tp']:>2} | {o['comm_elements_per_rank_per_step']:13d} "
              f"{o['comm_elements_forward']:11d} | {u['comm_elements_forward']:13d} | "
              f"{ratio(u['comm_elements_forward'], o['comm_elements_forward']):14.2f} | {kinds}")
    print("  ours fwd includes attention's and the loss's all-reduces; upstream fwd is the MLP "
          "stack only (Megatron's plan for it: one all-reduce of [B*T,C] per layer)")
    for r in rows:
        for kind, entry in sorted(r["upstream"]["collectives"].items()):
            for shape, count in entry["shapes"].items():
                print(f"  {r['preset']} upstream {kind} x{count}: {shape}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default=",".join(ALL_PRESETS),
                        help="comma-separated gpt2-mlir presets (default %(default)s)")
    parser.add_argument("--tp", type=int, default=0,
                        help="TP size / grid size for every preset (default: largest of "
                             "8, 5, 4 dividing the heads)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per tool (median time)")
    parser.add_argument("--batch", type=int, default=0, help="override the preset's batch (4)")
    parser.add_argument("--seq", type=int, default=0, help="override the preset's seq (64)")
    parser.add_argument("--json", help="write the numbers to this file")
    parser.add_argument("--keep", help="keep the generated and compiled IR in this directory")
    args = parser.parse_args()
    upstream = upstream_mlir_opt()
    presets = [p for p in args.presets.split(",") if p]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.keep or tmp
        os.makedirs(workdir, exist_ok=True)
        base = baselines(upstream, workdir, args.repeat)
        rows = [run_preset(p, args, workdir, upstream) for p in presets]
    print_table(rows, base, args.repeat)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "compile_time", "repeat": args.repeat,
                       "cpus": os.cpu_count(), "upstream_tool": upstream,
                       "upstream_pipeline": UPSTREAM_PIPELINE, "empty_module": base,
                       "results": rows}, f, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
