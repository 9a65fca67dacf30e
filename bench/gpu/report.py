#!/usr/bin/env python3
"""The GPU benchmark's bookkeeping (run.sh calls it; standard library only):

  report.py verdict   --ref CPU.jsonl --got GPU.jsonl [--rtol 2e-2] --out F
      per-step training loss of our GPU step against the CPU reference log;
      pass when both have the reference's steps, all finite, every
      |got - ref| / |ref| <= rtol. Grad norms are compared too, for
      information (not part of the verdict).
  report.py ours      --log LOG.jsonl --preset P --batch B --seq T
                      --vocab-rows V --warmup W [--peak-json F] --out F
      tokens/s of our step from megatron-run's --log ("ms" per step: the time
      around mgt_train_step).
  report.py sanitizer --log F --rc N --tool T --out F
      compute-sanitizer's "ERROR SUMMARY: N errors" line.
  report.py results   --work DIR --out-dir DIR
      results.json and results.md from the stage files in DIR (below).

Stage files in the work folder (each optional; a missing one is reported as
such): stages.jsonl (one {"stage","status","rc","seconds","note"} per
stage), gpu.json, verdict.json, verdict_fp32.json, sanitizer.json, peak.json, ours.json,
torch_eager.json, torch_compile.json, kernels.json.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mfu  # noqa: E402


def read_json(path):
    """A JSON file (or the last JSON line of a file); None if absent or bad."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    for candidate in [text] + text.splitlines()[::-1]:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")


def read_train_log(path):
    """megatron-run --log: the training lines ({"step","loss",...}), in order."""
    steps = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            entry = json.loads(line)
            if "loss" in entry and "step" in entry:
                steps.append(entry)
    return steps


def finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


def rel_diff(got, ref):
    return abs(got - ref) / max(abs(ref), 1e-30)


# --------------------------------------------------------------------------
def cmd_verdict(args):
    ref = read_train_log(args.ref)
    try:
        got = read_train_log(args.got)
    except OSError as e:
        got, problem = [], f"no GPU log: {e}"
    else:
        problem = None
    rows, worst, worst_norm = [], 0.0, 0.0
    for r, g in zip(ref, got):
        row = {"step": r["step"], "ref": r["loss"], "got": g["loss"]}
        if finite(g["loss"]) and finite(r["loss"]):
            row["rel"] = rel_diff(g["loss"], r["loss"])
            worst = max(worst, row["rel"])
        else:
            row["rel"] = None
            problem = problem or f"non-finite loss at step {r['step']}"
        if finite(r.get("grad_norm")) and finite(g.get("grad_norm")):
            worst_norm = max(worst_norm, rel_diff(g["grad_norm"], r["grad_norm"]))
        rows.append(row)
    if not problem and len(got) != len(ref):
        problem = f"GPU log has {len(got)} steps, reference {len(ref)}"
    if not problem and worst > args.rtol:
        problem = f"max relative loss difference {worst:.3e} > {args.rtol:g}"
    verdict = {"pass": problem is None, "reason": problem or "all steps within tolerance",
               "rtol": args.rtol, "steps": len(ref), "steps_got": len(got),
               "max_rel_diff": worst if rows else None,
               "grad_norm_max_rel_diff": worst_norm if rows else None,
               "ref_log": args.ref, "got_log": args.got, "per_step": rows}
    write_json(args.out, verdict)
    print(f"correctness: {'PASS' if verdict['pass'] else 'FAIL'}: {verdict['reason']}"
          f" (max rel {verdict['max_rel_diff']}, grad-norm max rel "
          f"{verdict['grad_norm_max_rel_diff']})")
    for row in rows:
        print(f"  step {row['step']}: cpu {row['ref']!r} gpu {row['got']!r} rel {row['rel']}")
    return 0 if verdict["pass"] else 1


# --------------------------------------------------------------------------
def cmd_ours(args):
    steps = read_train_log(args.log)
    missing = [s["step"] for s in steps if not finite(s.get("ms"))]
    if missing:
        raise SystemExit(f"{args.log}: no per-step 'ms' at steps {missing}")
    layers, heads, embd, _, ctx = mfu.preset(args.preset)
    figures = mfu.model_figures(layers, embd, args.vocab_rows, ctx, args.seq)
    summary = mfu.step_summary([s["ms"] for s in steps], args.warmup, args.batch * args.seq)
    peak = read_json(args.peak_json) if args.peak_json else None
    memory = None
    if args.mem_samples and args.mem_base is not None:
        try:
            with open(args.mem_samples) as f:
                used = [float(x) for x in f.read().split() if x.strip()]
            memory = (max(used) - args.mem_base) / 1024 if used else None
        except (OSError, ValueError):
            memory = None
    peak_tflops = peak.get("peak_tflops") if peak else None
    out = {"impl": "megatron-mlir", "preset": args.preset, "layers": layers, "heads": heads,
           "embd": embd, "vocab_rows": args.vocab_rows, "ctx": ctx, "batch": args.batch,
           "seq": args.seq, **figures, **summary,
           "mfu": mfu.mfu(summary["tokens_per_s"], figures["flops_per_token"],
                          peak_tflops * 1e12 if peak_tflops else None),
           "peak_tflops": peak_tflops, "step_so": args.step,
           # nvidia-smi's used memory of the whole device during the run, less
           # before it: includes the CUDA context (torch's figure does not).
           "peak_memory_gib": memory, "memory_source": "nvidia-smi memory.used delta",
           "step_ms_all": [s["ms"] for s in steps], "losses": [s["loss"] for s in steps],
           "grad_norms": [s.get("grad_norm") for s in steps]}
    write_json(args.out, out)
    print(f"ours: {out['tokens_per_s']:.0f} tokens/s, median step {out['step_ms_median']:.2f} ms"
          f" over {out['timed_steps']} steps (after {args.warmup} warm-up)")
    return 0


# --------------------------------------------------------------------------
def cmd_sanitizer(args):
    errors = None
    tail = ""
    try:
        with open(args.log, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        if "ERROR SUMMARY:" in line:
            try:
                errors = int(line.split("ERROR SUMMARY:")[1].split()[0])
            except (IndexError, ValueError):
                pass
    tail = "\n".join(lines[-15:])
    ok = args.rc == 0 and errors == 0
    out = {"tool": args.tool, "rc": args.rc, "errors": errors, "clean": ok,
           "log_tail": tail}
    write_json(args.out, out)
    print(f"compute-sanitizer {args.tool}: rc {args.rc}, errors {errors}: "
          f"{'clean' if ok else 'NOT clean'}")
    return 0 if ok else 1


# --------------------------------------------------------------------------
RUNS = [("ours", "megatron-mlir (our compiled step)"),
        ("torch_eager", "PyTorch eager (bf16 autocast)"),
        ("torch_compile", "PyTorch torch.compile (bf16 autocast)")]


def ratio(a, b):
    if a and b and a.get("tokens_per_s") and b.get("tokens_per_s"):
        return a["tokens_per_s"] / b["tokens_per_s"]
    return None


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def cmd_results(args):
    w = lambda name: read_json(os.path.join(args.work, name))  # noqa: E731
    stages = []
    try:
        with open(os.path.join(args.work, "stages.jsonl")) as f:
            stages = [json.loads(line) for line in f if line.strip()]
    except OSError:
        pass
    peak = w("peak.json")
    peak_tflops = peak.get("peak_tflops") if peak else None
    runs = {}
    for key, label in RUNS:
        r = w(f"{key}.json")
        if r is None:
            runs[key] = None
            continue
        # Recompute the MFU here so every run uses the same measured peak.
        r["mfu"] = mfu.mfu(r.get("tokens_per_s"), r.get("flops_per_token"),
                           peak_tflops * 1e12 if peak_tflops else None)
        r["label"] = label
        for bulky in ("step_ms_all", "grad_norms"):
            r.pop(bulky, None)
        runs[key] = r
    results = {
        "benchmark": "megatron-mlir GPU: GPT-2 training step",
        "gpu": w("gpu.json"),
        "peak_bf16_tflops": peak_tflops,
        "peak": peak,
        "correctness": w("verdict.json"),
        "correctness_fp32": w("verdict_fp32.json"),
        "sanitizer": w("sanitizer.json"),
        "kernels": w("kernels.json"),
        "runs": runs,
        "ratios": {"ours_over_torch_compile": ratio(runs.get("ours"), runs.get("torch_compile")),
                   "ours_over_torch_eager": ratio(runs.get("ours"), runs.get("torch_eager"))},
        "mfu_formula": "tokens/s * (6*N + 6*L*C*T) / measured bf16 peak (llm.c; bench/gpu/mfu.py)",
        "stages": stages,
    }
    os.makedirs(args.out_dir, exist_ok=True)
    write_json(os.path.join(args.out_dir, "results.json"), results)
    md = markdown(results)
    with open(os.path.join(args.out_dir, "results.md"), "w") as f:
        f.write(md)
    print(md)
    return 0


def markdown(res):
    gpu = res.get("gpu") or {}
    lines = ["# GPU benchmark: GPT-2 training step", ""]
    lines.append(f"GPU: {gpu.get('name', 'unknown')}, driver {gpu.get('driver_version', '?')}, "
                 f"{gpu.get('memory_total', '?')}; measured bf16 matmul peak "
                 f"{fmt(res['peak_bf16_tflops'], '.1f')} TFLOP/s")
    lines.append("")
    c = res.get("correctness")
    if c:
        lines.append(f"Correctness (GPT-2 tiny, TP=1, {c['steps']} steps, GPU vs CPU reference): "
                     f"**{'PASS' if c['pass'] else 'FAIL'}**: {c['reason']}; max relative loss "
                     f"difference {fmt(c.get('max_rel_diff'), '.2e')} (tolerance {c['rtol']:g}); "
                     f"grad norm {fmt(c.get('grad_norm_max_rel_diff'), '.2e')}")
    else:
        lines.append("Correctness: not run (see stages)")
    d = res.get("correctness_fp32")
    if d:
        lines.append(f"Diagnostic, the fp32 step with fp32 GEMMs vs the fp32 CPU reference: "
                     f"{'pass' if d['pass'] else 'FAIL'}: {d['reason']}; max relative loss "
                     f"difference {fmt(d.get('max_rel_diff'), '.2e')} (tolerance {d['rtol']:g})")
    s = res.get("sanitizer")
    if s:
        lines.append(f"compute-sanitizer {s['tool']} on 2 tiny steps: "
                     f"{'clean' if s['clean'] else 'NOT clean'} (errors {s['errors']}, rc {s['rc']})")
    else:
        lines.append("compute-sanitizer: not run (see stages)")
    lines += ["", "| run | B | T | median step ms | tokens/s | MFU | GPU mem GiB | first/last loss |",
              "|---|---|---|---|---|---|---|---|"]
    for key, label in RUNS:
        r = res["runs"].get(key)
        if not r:
            lines.append(f"| {label} | - | - | - | not run | - | - | - |")
            continue
        losses = r.get("losses") or [None]
        lines.append(
            f"| {label} | {r.get('batch')} | {r.get('seq')} | {fmt(r.get('step_ms_median'), '.2f')} "
            f"| {fmt(r.get('tokens_per_s'), ',.0f')} "
            f"| {fmt(r['mfu'] * 100 if r.get('mfu') is not None else None, '.1f')}% "
            f"| {fmt(r.get('peak_memory_gib'), '.1f')} "
            f"| {fmt(losses[0], '.4f')} / {fmt(losses[-1], '.4f')} |")
    ratios = res["ratios"]
    lines += ["", f"ours / torch.compile tokens/s: {fmt(ratios['ours_over_torch_compile'], '.3f')}; "
                  f"ours / eager: {fmt(ratios['ours_over_torch_eager'], '.3f')}",
              "", f"MFU = {res['mfu_formula']}.",
              "GPU mem: ours = nvidia-smi's used memory during the run less before it (CUDA "
              "context included); PyTorch = torch.cuda.max_memory_reserved (context excluded)."]
    lines += kernel_lines(res.get("kernels"))
    lines += ["", "| stage | status | rc | s | note |", "|---|---|---|---|---|"]
    for st in res["stages"]:
        lines.append(f"| {st.get('stage')} | {st.get('status')} | {st.get('rc')} | "
                     f"{st.get('seconds')} | {st.get('note', '')} |")
    return "\n".join(lines) + "\n"


def kernel_lines(kernels):
    """The kernels stage's table: our runtime's pieces beside PyTorch's."""
    if not kernels:
        return ["", "Kernels against PyTorch: not run (see stages)"]
    lines = ["", "Kernels against PyTorch (bench/gpu/kernels.py; median ms per call, bf16):", "",
             "| kernel | shape | ours ms | PyTorch ms | ours/PyTorch time | ours TFLOP/s "
             "| PyTorch TFLOP/s | max rel. diff |",
             "|---|---|---|---|---|---|---|---|"]
    for k in kernels["kernels"]:
        lines.append(f"| {k['kernel']} | {k['shape']} | {k['ours_ms']:.3f} | {k['torch_ms']:.3f} "
                     f"| {k['ours_over_torch_time']:.2f} | {fmt(k['ours_tflops'], '.1f')} "
                     f"| {fmt(k['torch_tflops'], '.1f')} | {k['max_rel_diff']:.2e}"
                     f"{'' if k['ok'] else ' MISMATCH'} |")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verdict")
    v.add_argument("--ref", required=True)
    v.add_argument("--got", required=True)
    v.add_argument("--rtol", type=float, default=2e-2)
    v.add_argument("--out", required=True)
    o = sub.add_parser("ours")
    o.add_argument("--log", required=True)
    o.add_argument("--preset", required=True, choices=list(mfu.PRESETS))
    o.add_argument("--batch", type=int, required=True)
    o.add_argument("--seq", type=int, required=True)
    o.add_argument("--vocab-rows", type=int, required=True)
    o.add_argument("--warmup", type=int, required=True)
    o.add_argument("--step", help="the step .so (recorded)")
    o.add_argument("--peak-json")
    o.add_argument("--mem-samples", help="nvidia-smi memory.used samples (MiB), one a line")
    o.add_argument("--mem-base", type=float, help="memory.used (MiB) before the run")
    o.add_argument("--out", required=True)
    s = sub.add_parser("sanitizer")
    s.add_argument("--log", required=True)
    s.add_argument("--rc", type=int, required=True)
    s.add_argument("--tool", default="memcheck")
    s.add_argument("--out", required=True)
    r = sub.add_parser("results")
    r.add_argument("--work", required=True)
    r.add_argument("--out-dir", required=True)
    args = p.parse_args()
    return {"verdict": cmd_verdict, "ours": cmd_ours, "sanitizer": cmd_sanitizer,
            "results": cmd_results}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
