#!/usr/bin/env python3
"""Compile time and step-library size against depth, beside JAX/XLA.

For GPT-2 at a preset's widths (--preset, 124M by default: C=768, 12
heads, V=50257; B=4, T=1024 unless given) and each depth in --layers:

  outlined: megatron-compile g.mlir --train -o step.so   (the default: each
            distinct layer body lowered and compiled once, tp-outline-layers,
            and called in a loop over the stacked layers, tp-roll-layers)
  inlined:  the same with --outline-layers=false (every layer its own code)
  jax:      jax.jit(jax.value_and_grad(loss)).lower(...).compile() of
            utils/gpt2_reference/gpt2_jax.py's loss (a Python loop over the
            layers: XLA sees every layer), and of the same model with the
            layers' parameters stacked and run by jax.lax.scan (XLA compiles
            one layer body)

and, with --cuda, the outlined and inlined --target=cuda steps. Each is
timed --repeat times in this one run (median wall seconds); sizes are the
.so's bytes. The last lines give each column's time at the deepest depth
over its time at the shallowest one beside it (the issue's target: 48 over
12 layers at most 1.5).

  bench/compile/depth_curve.py [--preset 124M] [--layers 3,6,12,24,48]
      [--repeat 3] [--cuda] [--no-jax] [--dropout P] [--json FILE]

JAX's model is 124M's widths without dropout; with another preset, or
--dropout (the training step's, gpt2-mlir --dropout), pass --no-jax.

Tools come from build/bin (scripts/build.sh); JAX from pip (bench only).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")


def timed(cmd, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ours(args, layers, work):
    model = os.path.join(work, f"g{layers}.mlir")
    subprocess.run([os.path.join(BIN, "gpt2-mlir"), f"--preset={args.preset}",
                    f"--layers={layers}", f"--batch={args.batch}",
                    f"--seq={args.seq}", f"--dropout={args.dropout}", "-o",
                    model], check=True)
    row = {}
    targets = [("cpu", [])] + ([("cuda", ["--target=cuda"])] if args.cuda else [])
    for target, flags in targets:
        for variant, extra in [("outlined", []),
                               ("inlined", ["--outline-layers=false"])]:
            out = os.path.join(work, f"{target}-{variant}-{layers}.so")
            cmd = ([os.path.join(BIN, "megatron-compile"), model, "--train"] +
                   flags + extra + ["-o", out])
            row[f"{target}_{variant}_s"] = timed(cmd, args.repeat)
            row[f"{target}_{variant}_bytes"] = os.path.getsize(out)
    return row


JAX_WORKER = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
import jax, jax.numpy as jnp
import gpt2_jax as g

layers, batch, seq, repeat = map(int, sys.argv[2:6])
C, H, V = 768, 12, 50304
f32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)
ids = jax.ShapeDtypeStruct((batch, seq), jnp.int32)
block = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C),
         "attn.c_attn.bias": (3 * C,), "attn.c_proj.weight": (C, C),
         "attn.c_proj.bias": (C,), "ln_2.weight": (C,), "ln_2.bias": (C,),
         "mlp.c_fc.weight": (C, 4 * C), "mlp.c_fc.bias": (4 * C,),
         "mlp.c_proj.weight": (4 * C, C), "mlp.c_proj.bias": (C,)}
top = {"wte.weight": (V, C), "wpe.weight": (1024, C), "ln_f.weight": (C,),
       "ln_f.bias": (C,)}

unrolled = {n: f32(*s) for n, s in top.items()}
unrolled.update({f"h.{i}.{n}": f32(*s) for i in range(layers) for n, s in block.items()})

def layer(x, p):
    h = g.layer_norm(x, p["ln_1.weight"], p["ln_1.bias"])
    a = g.attention(h @ p["attn.c_attn.weight"] + p["attn.c_attn.bias"], H)
    x = x + (a @ p["attn.c_proj.weight"] + p["attn.c_proj.bias"])
    h = g.layer_norm(x, p["ln_2.weight"], p["ln_2.bias"])
    h = g.gelu_tanh(h @ p["mlp.c_fc.weight"] + p["mlp.c_fc.bias"])
    return x + (h @ p["mlp.c_proj.weight"] + p["mlp.c_proj.bias"]), None

def scanned_loss(params, ids, targets):
    x = params["wte.weight"][ids] + params["wpe.weight"][:ids.shape[1]][None]
    x, _ = jax.lax.scan(layer, x, params["h"])
    x = g.layer_norm(x, params["ln_f.weight"], params["ln_f.bias"])
    logits = (x @ params["wte.weight"].T)[..., :50257]
    lse = jax.nn.logsumexp(logits, axis=-1)
    tgt = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return jnp.mean(lse - tgt)

scanned = {n: f32(*s) for n, s in top.items()}
scanned["h"] = {n: f32(layers, *s) for n, s in block.items()}

def compile_seconds(fn, params):
    times = []
    for _ in range(repeat):
        jax.clear_caches()
        start = time.perf_counter()
        jax.jit(jax.value_and_grad(fn)).lower(params, ids, ids).compile()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]

print(json.dumps({
    "jax_unrolled_s": compile_seconds(
        lambda p, i, t: g.loss_fn(p, i, t, H, 50257), unrolled),
    "jax_scanned_s": compile_seconds(scanned_loss, scanned)}))
'''


def jax_peer(args, layers):
    out = subprocess.run(
        [sys.executable, "-c", JAX_WORKER,
         os.path.join(ROOT, "utils", "gpt2_reference"), str(layers),
         str(args.batch), str(args.seq), str(args.repeat)],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="124M")
    ap.add_argument("--layers", default="3,6,12,24,48")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    if (args.preset != "124M" or args.dropout) and not args.no_jax:
        ap.error("the JAX peer has 124M's widths and no dropout; pass --no-jax")
    depths = [int(x) for x in args.layers.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for layers in depths:
            row = {"layers": layers, **ours(args, layers, work)}
            if not args.no_jax:
                row.update(jax_peer(args, layers))
            rows.append(row)
            print(json.dumps(row), flush=True)
    columns = [k for k in rows[0] if k.endswith("_s")]
    print(f"\nlayers  " + "  ".join(f"{c:>18}" for c in columns))
    for row in rows:
        print(f"{row['layers']:6d}  " +
              "  ".join(f"{row[c]:18.2f}" for c in columns))
    first, last = rows[0], rows[-1]
    print(f"\n{last['layers']} over {first['layers']} layers:")
    for c in columns:
        print(f"  {c}: {last[c] / first[c]:.2f}x")
    sizes = [k for k in rows[0] if k.endswith("_bytes")]
    for c in sizes:
        print(f"  {c}: {first[c]} -> {last[c]} bytes ({last[c] / first[c]:.2f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
