#!/usr/bin/env python3
"""bf16 training on CPU: our compiled bf16 step beside our fp32 step and the
peers' bf16 steps, in the same run, at GPT-2 124M and 350M width.

  bench/cpu/bf16_compare.py [--configs 124M,350M] [--layouts 1x1,1x2]
      [--steps 10] [--threads T] [--json FILE] [--keep DIR]

Configurations (B=4, T=64 as train_compare.py's 124M):
  124M  12 layers, 12 heads,  768 wide, vocab 50257
  350M  24 layers, 16 heads, 1024 wide, vocab 50257 (GPT-2 medium)

Each configuration starts every contender from the same GPT-2 initialisation
and tokens (train_compare.py's prepare) and runs --steps AdamW steps (lr 3e-4,
no weight decay, no clipping); step times are medians after the first 2
steps (torch.compile compiles in its first step).
  ours fp32:  megatron-compile --train, megatron-run (train_compare.py's run)
  ours bf16:  the same with --precision=bf16: bf16 activations and parameter
              copies, fp32 masters, gradients' reductions and AdamW
  torch eager / compile bf16: torch.autocast("cpu", dtype=torch.bfloat16)
              around the forward pass (fp32 parameters, bf16 GEMMs), eager
              and under torch.compile, one process on the thread budget at
              every layout (it has no tensor parallelism)
  JAX bf16:   parameters and activations cast to bf16 inside the jitted step
              (fp32 masters, AdamW and loss); at TP=2 two host devices with
              Megatron's shardings (train_compare.py's JAX peer)
Layouts as train_compare.py's: DxT ranks, the thread budget split evenly
(TP=1: two threads; TP=2: one per rank on this 2-core machine).

The report names the CPU and what runs our bf16 GEMMs (megatron-run's
"GEMMs" line: oneDNN's kernel and whether it uses AMX matrix units or
AVX-512-BF16 dot products). It prints, per layout:
  - fp32/bf16: our fp32 step time over our bf16 step time (goal on a CPU
    with AMX-BF16: >= 2);
  - torch/ours: PyTorch eager bf16 over our bf16 step (goal >= 1.5), and the
    same for torch.compile and JAX;
  - the bf16 step against its ceiling: gemm_ceiling.py --precision bf16's
    time (the step's GEMMs at the runtime's bf16 rates, measured on the
    same threads, plus the fp32 AdamW and norm passes over the parameters);
    measured at TP=1 only (the ceiling of one rank's whole model);
  - correctness: the largest relative difference of our bf16 step's losses
    from our fp32 step's (bar: 2e-2), and the peers' bf16 losses from ours.
Where oneDNN has no bf16 instructions on this CPU (no AVX-512-BF16, no AMX)
the speed figures mean nothing: the report says so and only the losses are
compared (our bf16 step then needs MRT_GEMM_BF16=widened to run at all).

Run scripts/build.sh first; JAX from utils/gpt2_reference, PyTorch from
bench/requirements-decode.txt (installed on first use).
"""
import argparse
import json
import os
import platform
import sys
import tempfile
from types import SimpleNamespace

import gemm_ceiling
import train_compare as tc
from torch_peer import ensure_torch

CONFIGS = {
    "124M": (12, 12, 768, 50257, 1024, 64, 4),
    "350M": (24, 16, 1024, 50257, 1024, 64, 4),
}
LOSS_BAR = 2e-2


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def max_rel_diff(a, b):
    return max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b))


def native_bf16(engines):
    """Whether megatron-run's GEMMs line says bf16 runs on bf16 instructions."""
    return engines is not None and ("AMX-BF16" in engines or "AVX-512-BF16" in engines)


def ceiling_ms(cfg, threads):
    """gemm_ceiling.py --precision bf16's step ceiling for the configuration,
    on `threads` OpenMP threads (set before the runtime starts its pool)."""
    layers, heads, embd, vocab, _, seq, batch = cfg
    os.environ["OMP_NUM_THREADS"] = str(threads)
    shape = SimpleNamespace(width=embd, batch=batch, seq=seq, vocab=vocab,
                            layers=layers, heads=heads)
    gemms, _ = gemm_ceiling.bf16_gemm_seconds(shape, verbose=False)
    ceiling = gemm_ceiling.step_ceiling_seconds(shape, gemms)[0]
    return ceiling * 1e3, gemms * 1e3


def run_config(name, args, workdir):
    cfg = CONFIGS[name]
    heads, batch = cfg[1], cfg[6]
    paths = tc.prepare(name, args, workdir, cfg)
    torch_runs = {mode: tc.run_torch(cfg, paths, args, mode)
                  for mode in ("bf16-eager", "bf16-compile")}
    rows = []
    for dp, tp in args.layouts:
        if heads % tp or batch % dp:
            print(f"{name}: {tc.tag(dp, tp)} does not divide {heads} heads and batch "
                  f"{batch}, skipped", file=sys.stderr)
            continue
        ours = {}
        for precision in ("fp32", "bf16"):
            label = f"{tc.tag(dp, tp)}-{precision}"
            step, _, manifest, _ = tc.compile_ours(
                cfg, paths["dir"], dp, tp, [f"--precision={precision}"], label)
            ours[precision] = tc.run_ours(step, dp, tp, paths, args, label)
        wte = next(a for a in manifest["args"] if a["name"] == "wte.weight")
        jax_bf16 = tc.run_jax(cfg, dp, tp, wte["global_shape"][0], paths, args, bf16=True)
        rows.append({"config": name, "layout": tc.tag(dp, tp), "dp": dp, "tp": tp,
                     "ours_fp32": ours["fp32"], "ours_bf16": ours["bf16"],
                     "torch_bf16_eager": torch_runs["bf16-eager"],
                     "torch_bf16_compile": torch_runs["bf16-compile"],
                     "jax_bf16": jax_bf16})
        print(f"  done {name} {tc.tag(dp, tp)}", file=sys.stderr, flush=True)
    if any(r["tp"] == 1 and r["dp"] == 1 for r in rows):
        ceiling, gemms = ceiling_ms(cfg, args.threads)
        for r in rows:
            if r["tp"] == 1 and r["dp"] == 1:
                r["ceiling_ms"], r["ceiling_gemm_ms"] = ceiling, gemms
    return rows


def print_report(rows, args):
    engines = next((r["ours_bf16"]["gemm_engines"] for r in rows), None)
    print(f"bf16 GPT-2 training on CPU: {cpu_model()}, {os.cpu_count()} cores, thread "
          f"budget {args.threads}; median step ms of steps {tc.WARMUP}..{args.steps - 1}")
    print(f"  our GEMMs: {engines}")
    speed = native_bf16(engines)
    if not speed:
        print("  this CPU has no bf16 instructions oneDNN uses (no AVX-512-BF16, no AMX): "
              "the times below are not bf16 speed; only the losses are compared")
    print(f"{'config':>6} {'DxT':>3} | {'fp32':>7} {'bf16':>7} {'fp32/bf16':>9} | "
          f"{'torch':>7} {'t/ours':>6} | {'compile':>7} {'c/ours':>6} | "
          f"{'JAX':>7} {'J/ours':>6} | {'ceiling':>7} {'ours/ceil':>9} | "
          f"{'bf16 vs fp32':>12} {'torch':>7} {'JAX':>7}")
    for r in rows:
        o32, o16 = r["ours_fp32"], r["ours_bf16"]
        te, tcmp, jx = r["torch_bf16_eager"], r["torch_bf16_compile"], r["jax_bf16"]
        ceiling = (f"{r['ceiling_ms']:7.1f} {o16['step_ms'] / r['ceiling_ms']:9.2f}"
                   if "ceiling_ms" in r else f"{'-':>7} {'-':>9}")
        print(f"{r['config']:>6} {r['layout']:>3} | {o32['step_ms']:7.1f} {o16['step_ms']:7.1f} "
              f"{o32['step_ms'] / o16['step_ms']:9.2f} | "
              f"{te['step_ms']:7.1f} {te['step_ms'] / o16['step_ms']:6.2f} | "
              f"{tcmp['step_ms']:7.1f} {tcmp['step_ms'] / o16['step_ms']:6.2f} | "
              f"{jx['step_ms']:7.1f} {jx['step_ms'] / o16['step_ms']:6.2f} | {ceiling} | "
              f"{max_rel_diff(o16['losses'], o32['losses']):12.1e} "
              f"{max_rel_diff(te['losses'], o16['losses']):7.1e} "
              f"{max_rel_diff(jx['losses'], o16['losses']):7.1e}")
    print("  X/ours = X's step time over our bf16 step's (> 1: ours faster); torch and "
          "compile run one process on the whole thread budget at every layout")
    print(f"  ceiling: the bf16 GEMMs at the runtime's measured rates plus the fp32 AdamW and "
          f"norm passes (gemm_ceiling.py --precision bf16), at 1x1")
    print(f"  losses: max relative difference over {args.steps} steps; bf16 vs fp32 must stay "
          f"within {LOSS_BAR:g}")
    failed = [r for r in rows
              if max_rel_diff(r["ours_bf16"]["losses"], r["ours_fp32"]["losses"]) > LOSS_BAR]
    for r in failed:
        print(f"FAILED: {r['config']} {r['layout']}: the bf16 step's losses are more than "
              f"{LOSS_BAR:g} from the fp32 step's")
    return not failed


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="124M,350M",
                        help="comma-separated, from " + ", ".join(CONFIGS))
    parser.add_argument("--layouts", default="1x1,1x2", help="DxT layouts (default %(default)s)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--json", help="write the numbers to this file")
    parser.add_argument("--keep", help="keep checkpoints, IR, steps and logs in this directory")
    args = parser.parse_args()
    args.layouts = [tuple(int(n) for n in t.split("x")) for t in args.layouts.split(",") if t]
    args.mpi_args, args.jax_xla_flags = "", ""
    names = [c for c in args.configs.split(",") if c]
    for c in names:
        if c not in CONFIGS:
            parser.error(f"unknown config {c}")
    if args.steps <= tc.WARMUP:
        parser.error(f"--steps must be > {tc.WARMUP}")
    ensure_torch()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in names:
            rows += run_config(c, args, args.keep or tmp)
    ok = print_report(rows, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "bf16_compare", "cpu": cpu_model(),
                       "cpus": os.cpu_count(), "threads": args.threads, "steps": args.steps,
                       "warmup": tc.WARMUP, "results": rows}, f, indent=2)
        print(f"wrote {args.json}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
