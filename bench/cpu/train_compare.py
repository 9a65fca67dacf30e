#!/usr/bin/env python3
"""GPT-2 training on CPU: our compiled parallel step (megatron-run under
MPI) beside the same model in JAX (jit, fp32, GSPMD sharding), in the same
run, at several data x tensor-parallel layouts (DxT: D data-parallel groups
of T tensor-parallel ranks; default 1x1 and 1x2). Prints step time,
tokens/s, peak memory and the ours/JAX ratios, and optionally writes them as
JSON.

  bench/cpu/train_compare.py [--configs tiny,cpu,124M] [--layouts 1x1,1x2,2x1]
      [--steps 10] [--threads T] [--no-torch] [--json FILE] [--keep DIR] [--mpi-args ARGS]
      [--jax-xla-flags FLAGS]

Configurations (--configs, default all):
  tiny  2 layers,  4 heads,  64 wide, vocab 512,   T=32,  B=2
  cpu   4 layers,  4 heads, 256 wide, vocab 512,   T=128, B=4
  124M 12 layers, 12 heads, 768 wide, vocab 50257, T=64,  B=4

Both sides start from the same weights (a GPT-2 initialisation written as a
safetensors checkpoint, utils/gpt2_reference) and read the same random tokens
(tokens_io, batch s = tokens [s*B*T, (s+1)*B*T]); AdamW with lr 3e-4, betas
0.9/0.999, eps 1e-8, no weight decay, no clipping (megatron-run's defaults),
constant learning rate. Their losses are printed side by side as a check that
the two compute the same thing.

ours:  gpt2-mlir (config flags) -> megatron-compile --dp=D --tp=T --train ->
       mpirun --oversubscribe --bind-to none -np D*T
         /usr/bin/time -a -o maxrss.txt -f "maxrss_kb %M" megatron-run step.so
         --init-from model.safetensors --data tokens.bin --steps S --lr 3e-4
         --log log.jsonl
       step time = median "ms" of the log (rank 0's time around
       mgt_train_step) after the first 2 steps; peak memory per rank = the
       max RSS /usr/bin/time reports for each megatron-run (VmHWM).
PyTorch: eager GPT-2 (torch_worker), one process on the whole thread budget at
       every layout (it has no tensor parallelism), installed on first use
       from bench/requirements-decode.txt; --no-torch leaves it out.
Rates: each step's model FLOPs (the one-rank manifest's count) over its
       median time, and that as a share of numpy's 2048-square sgemm rate on
       the same thread budget: the better of a measurement at the start of
       the run and one at its end.
JAX:   utils/gpt2_reference/gpt2_jax.py's model (layer_norm, gelu_tanh,
       clip_grads for the global norm, adamw_update) as one jitted train step
       (value_and_grad + AdamW, parameters and moments donated), in a
       subprocess per configuration:
       TP=1: one host device.
       DxT: XLA_FLAGS=--xla_force_host_platform_device_count=D*T, a Mesh
       (D, T) with axes "dp" and "tp", the batch of the tokens split over
       "dp", and Megatron's shardings on the parameters over "tp"
       (NamedSharding):
       c_attn weight/bias split by columns per q/k/v section (kept as
       [C,3,C] / [3,C], split on the last dim), c_fc weight/bias by columns,
       attn.c_proj and mlp.c_proj weights by rows, wte by vocabulary rows
       (padded to our padded vocabulary), the rest replicated; GSPMD inserts
       the collectives (their count is reported from the compiled HLO). The
       loss masks padded vocabulary columns and picks the target logit with
       a compare instead of slicing and gathering, so that a vocabulary-split
       logits tensor is not gathered; it equals gpt2_jax.loss_fn.
       step time = median wall time of the jitted call (block_until_ready)
       after the first 2 steps; peak memory = the process's
       getrusage(RUSAGE_SELF).ru_maxrss. At TP=N the N host devices live in
       one process: its peak is the total of all "ranks", compared with the
       sum of our ranks' peaks. That peak includes XLA's compilation of the
       step; "run" is the peak of the training steps alone (VmHWM, reset
       through /proc/self/clear_refs after compiling; ours compiles ahead of
       time, so its peak is a run peak). The process's peak after importing
       JAX and creating the devices (before any parameter) is "base".

Threads: the machine's cores (or --threads T) are the total budget. Ours: N
= D*T ranks with OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = max(1, T // N) each, not
bound to cores (--bind-to none; Open MPI would otherwise bind one rank to one
core). JAX: one process whose XLA CPU thread pools size themselves from the
process's CPU affinity; with T < cores both sides run under
`taskset -c 0-(T-1)`.
OMP_NUM_THREADS/OPENBLAS_NUM_THREADS=T are set for JAX as well (XLA uses
neither). No XLA thread flags are set (--xla_cpu_multi_thread_eigen=false
would make JAX's GEMMs single-threaded); --jax-xla-flags adds some.

Timing needs a quiet machine: with other processes on the cores, OpenMP's
and Open MPI's busy-waiting make our step times jump (seen on the 2-core
machine during a build: tiny TP=2 at 2 ms in one run, 170 ms in the next).

Run scripts/build.sh first; JAX comes from utils/gpt2_reference
(pip install -r utils/gpt2_reference/requirements.txt).
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")
REF = os.path.join(ROOT, "utils", "gpt2_reference")
sys.path.insert(0, REF)

from torch_peer import ensure_torch  # noqa: E402

# name: (layers, heads, embd, vocab, ctx, seq, batch)
CONFIGS = {
    "tiny": (2, 4, 64, 512, 64, 32, 2),
    "cpu": (4, 4, 256, 512, 128, 128, 4),
    "124M": (12, 12, 768, 50257, 1024, 64, 4),
}
WARMUP = 2           # steps left out of the medians
LR = 3e-4
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


# --------------------------------------------------------------------------
# ours
# --------------------------------------------------------------------------
def tag(dp, tp):
    return f"{dp}x{tp}"


def compile_ours(cfg, workdir, dp, tp, flags=(), label=None):
    """megatron-compile --dp --tp --train [flags] into step-LABEL.so (label:
    DxT); returns (step.so, compile s, manifest, tp-explain report)."""
    mlir = os.path.join(workdir, "gpt2.mlir")
    step = os.path.join(workdir, f"step-{label or tag(dp, tp)}.so")
    layout = [f"--dp={dp}", f"--tp={tp}"]
    start = time.perf_counter()
    subprocess.run([os.path.join(BIN, "megatron-compile"), mlir, *layout, "--train",
                    *flags, "-o", step], check=True)
    seconds = time.perf_counter() - start
    manifest = json.loads(subprocess.run(
        [os.path.join(BIN, "megatron-compile"), mlir, *layout, "--train",
         "--emit=manifest", "-o", "-"], check=True, capture_output=True, text=True).stdout)
    report = json.loads(subprocess.run(
        [os.path.join(BIN, "megatron-opt"), mlir, f"--megatron-pipeline=tp={tp} dp={dp}",
         "--tp-autodiff", "--tp-optimizer", "--tp-explain=json=-", "-o", "/dev/null"],
        check=True, capture_output=True, text=True).stdout)
    return step, seconds, manifest, report


def affinity_prefix(threads):
    if threads >= os.cpu_count():
        return []
    return ["taskset", "-c", f"0-{threads - 1}"]


def run_ours(step, dp, tp, paths, args, label=None):
    """megatron-run of step on D*T ranks (logs named by label, default DxT);
    returns its times, losses, peaks and the GEMM engines it named."""
    ranks = dp * tp
    label = label or tag(dp, tp)
    log = os.path.join(paths["dir"], f"log-{label}.jsonl")
    rss = os.path.join(paths["dir"], f"maxrss-{label}.txt")
    for old in (log, rss):
        if os.path.exists(old):
            os.remove(old)
    per_rank = max(1, args.threads // ranks)
    env = dict(os.environ, **MPI_ENV, OMP_NUM_THREADS=str(per_rank),
               OPENBLAS_NUM_THREADS=str(per_rank))
    cmd = affinity_prefix(args.threads) + [
        "mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks),
        "-x", "OMP_NUM_THREADS", "-x", "OPENBLAS_NUM_THREADS"] + args.mpi_args.split() + [
        "/usr/bin/time", "-a", "-o", rss, "-f", "maxrss_kb %M",
        os.path.join(BIN, "megatron-run"), step, "--init-from", paths["model"],
        "--data", paths["tokens"], "--steps", str(args.steps), "--lr", str(LR),
        "--log", log]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"megatron-run failed ({proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    with open(rss) as f:   # one line per rank, appended by each rank's /usr/bin/time
        text = f.read()
    peaks = [int(k) for k in re.findall(r"^maxrss_kb (\d+)$", text, re.M)]
    if len(peaks) != ranks:
        raise RuntimeError(f"expected {ranks} maxrss lines in {rss}, got:\n{text}")
    with open(log) as f:
        steps = [json.loads(line) for line in f if '"loss"' in line]
    ms = [s["ms"] for s in steps]
    engines = re.search(r"^megatron-run: GEMMs (.*)$", proc.stderr, re.M)
    return {"command": " ".join(cmd[len(affinity_prefix(args.threads)):]),
            "gemm_engines": engines.group(1) if engines else None,
            "threads_per_rank": per_rank, "step_ms": statistics.median(ms[WARMUP:]),
            "step_ms_all": ms, "losses": [s["loss"] for s in steps],
            "grad_norms": [s.get("grad_norm") for s in steps],
            "peak_kib_per_rank": peaks, "peak_kib_total": sum(peaks)}


def run_worker(kind, name, spec, env, paths, args):
    """Runs `--<kind>-worker` of this script in its own process on the thread
    budget, with the spec written to NAME.spec.json; returns NAME.out.json."""
    spec_path = os.path.join(paths["dir"], f"{name}.spec.json")
    out_path = os.path.join(paths["dir"], f"{name}.out.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    cmd = affinity_prefix(args.threads) + [sys.executable, os.path.abspath(__file__),
                                           f"--{kind}-worker", spec_path, out_path]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    with open(out_path) as f:
        return json.load(f)


# --------------------------------------------------------------------------
# JAX (the worker runs in its own process: XLA_FLAGS apply at start-up)
# --------------------------------------------------------------------------
def run_jax(cfg, dp, tp, padded_vocab, paths, args, bf16=False):
    """The JAX peer; bf16: parameters and activations cast to bf16 inside the
    step (fp32 masters, AdamW and loss), as JAX mixed precision is written."""
    spec = {"cfg": cfg, "dp": dp, "tp": tp, "padded_vocab": padded_vocab,
            "steps": args.steps, "model": paths["model"], "tokens": paths["tokens"],
            "bf16": bf16}
    flags = ([f"--xla_force_host_platform_device_count={dp * tp}"]
             if dp * tp > 1 else [])
    flags += args.jax_xla_flags.split()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads), XLA_FLAGS=" ".join(flags),
               JAX_PLATFORMS="cpu")
    out = run_worker("jax", f"jax-{tag(dp, tp)}{'-bf16' if bf16 else ''}", spec, env,
                     paths, args)
    out["xla_flags"] = env["XLA_FLAGS"]
    return out


def vm_hwm_kib():
    with open("/proc/self/status") as f:
        return int(re.search(r"^VmHWM:\s*(\d+) kB", f.read(), re.M).group(1))


def jax_worker(spec_path, out_path):
    import resource

    with open(spec_path) as f:
        spec = json.load(f)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    import gpt2_jax
    import safetensors_io
    import tokens_io

    layers, heads, embd, vocab, ctx, seq, batch = spec["cfg"]
    dp, tp, steps, vp = spec["dp"], spec["tp"], spec["steps"], spec["padded_vocab"]
    devices = jax.devices()
    if len(devices) < dp * tp:
        raise SystemExit(f"{len(devices)} devices, need {dp * tp}")
    mesh = Mesh(np.array(devices[:dp * tp]).reshape(dp, tp), ("dp", "tp"))
    base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def pspec(name):
        if name == "wte.weight":
            return P("tp", None)
        if name.endswith("attn.c_attn.weight"):
            return P(None, None, "tp")        # [C, 3, C]: each section by columns
        if name.endswith("attn.c_attn.bias"):
            return P(None, "tp")              # [3, C]
        if name.endswith("mlp.c_fc.weight"):
            return P(None, "tp")
        if name.endswith("mlp.c_fc.bias"):
            return P("tp")
        if name.endswith("c_proj.weight"):   # attn.c_proj and mlp.c_proj: rows
            return P("tp", None)
        return P()

    shardings = {}
    params = {}
    host = safetensors_io.load_gpt2(spec["model"])
    for name in list(host):
        value = host.pop(name)
        if name == "wte.weight" and value.shape[0] < vp:
            value = np.concatenate([value, np.zeros((vp - value.shape[0], embd), np.float32)])
        elif name.endswith("attn.c_attn.weight"):
            value = value.reshape(embd, 3, embd)
        elif name.endswith("attn.c_attn.bias"):
            value = value.reshape(3, embd)
        shardings[name] = NamedSharding(mesh, pspec(name))
        params[name] = jax.device_put(value, shardings[name])
        del value
    del host
    replicated = NamedSharding(mesh, P())
    rows = NamedSharding(mesh, P("dp", None))   # each dp group its rows of the batch

    def attention(q, k, v):
        B, T, C = q.shape
        D = C // heads

        def split(x):
            return x.reshape(B, T, heads, D).transpose(0, 2, 1, 3)
        s = jnp.einsum("bhtd,bhsd->bhts", split(q), split(k)) * (1.0 / math.sqrt(D))
        s = jnp.where(jnp.tril(jnp.ones((T, T), dtype=bool)), s, -jnp.inf)
        y = jnp.einsum("bhts,bhsd->bhtd", jax.nn.softmax(s, axis=-1), split(v))
        return y.transpose(0, 2, 1, 3).reshape(B, T, C)

    def loss_fn(p, ids, targets):
        """gpt2_jax.loss_fn with c_attn as [C,3,C] and a shard-friendly loss."""
        if spec["bf16"]:
            p = {n: a.astype(jnp.bfloat16) for n, a in p.items()}
        T = ids.shape[1]
        x = p["wte.weight"][ids] + p["wpe.weight"][:T][None]
        for i in range(layers):
            n = f"h.{i}."
            h = gpt2_jax.layer_norm(x, p[n + "ln_1.weight"], p[n + "ln_1.bias"])
            qkv = jnp.einsum("btc,csd->btsd", h, p[n + "attn.c_attn.weight"]) \
                + p[n + "attn.c_attn.bias"]
            a = attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2])
            x = x + (a @ p[n + "attn.c_proj.weight"] + p[n + "attn.c_proj.bias"])
            h = gpt2_jax.layer_norm(x, p[n + "ln_2.weight"], p[n + "ln_2.bias"])
            h = gpt2_jax.gelu_tanh(h @ p[n + "mlp.c_fc.weight"] + p[n + "mlp.c_fc.bias"])
            x = x + (h @ p[n + "mlp.c_proj.weight"] + p[n + "mlp.c_proj.bias"])
        x = gpt2_jax.layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
        logits = (x @ p["wte.weight"].T).astype(jnp.float32)  # [B,T,Vp]
        col = jnp.arange(logits.shape[-1])
        logits = jnp.where(col < vocab, logits, -jnp.inf)    # padded columns out
        lse = jax.nn.logsumexp(logits, axis=-1)
        tgt = jnp.sum(jnp.where(col == targets[..., None], logits, 0.0), axis=-1)
        return jnp.mean(lse - tgt)

    def step_fn(p, m, v, ids, targets, step_size, bc2_sqrt):
        loss, g = jax.value_and_grad(loss_fn)(p, ids, targets)
        _, norm = gpt2_jax.clip_grads(g, None)               # norm only: no clipping
        newp, newm, newv = {}, {}, {}
        for n in p:
            newp[n], newm[n], newv[n] = gpt2_jax.adamw_update(
                p[n], g[n], m[n], v[n], step_size, bc2_sqrt, BETA1, BETA2, EPS, None)
        return newp, newm, newv, loss, norm

    state_sh = (shardings, shardings, shardings)
    step = jax.jit(step_fn, in_shardings=state_sh + (rows, rows, replicated, replicated),
                   out_shardings=state_sh + (replicated, replicated),
                   donate_argnums=(0, 1, 2))
    shapes = {n: a.shape for n, a in params.items()}
    zeros = jax.jit(lambda: {n: jnp.zeros(s, jnp.float32) for n, s in shapes.items()},
                    out_shardings=shardings)
    m, v = zeros(), zeros()

    tokens = tokens_io.read_tokens(spec["tokens"])
    batches = []
    for s in range(steps):
        ids, tg = tokens_io.batch(tokens, s, batch, seq)
        batches.append((jax.device_put(ids, rows), jax.device_put(tg, rows)))

    def scalars(s):
        t = s + 1
        return (jax.device_put(np.float32(LR / (1.0 - BETA1 ** t)), replicated),
                jax.device_put(np.float32(math.sqrt(1.0 - BETA2 ** t)), replicated))

    start = time.perf_counter()
    compiled = step.lower(params, m, v, *batches[0], *scalars(0)).compile()
    compile_s = time.perf_counter() - start
    hlo = compiled.as_text()
    with open(out_path.replace(".out.json", ".hlo.txt"), "w") as f:
        f.write(hlo)
    collectives = {}
    for line in hlo.splitlines():
        match = re.search(r"=\s*(\(?[^=]*?\)?)\s+(all-reduce|all-gather|reduce-scatter|"
                          r"all-to-all|collective-permute)(-start)?\(", line)
        if not match:
            continue
        kind = match.group(2)
        elements = 0
        for dims in re.findall(r"[a-z]+\d*\[([0-9,]*)\]", match.group(1)):
            elements += math.prod(int(d) for d in dims.split(",") if d)
        entry = collectives.setdefault(kind, {"count": 0, "elements": 0})
        entry["count"] += 1
        entry["elements"] += elements

    # Peak so far (XLA's compilation included), then reset the high-water mark
    # so that the training steps' own peak can be read too.
    setup_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    times, losses, norms = [], [], []
    for s in range(steps):
        sc = scalars(s)
        t0 = time.perf_counter()
        params, m, v, loss, norm = compiled(params, m, v, *batches[s], *sc)
        jax.block_until_ready((params, m, v, loss, norm))
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss))
        norms.append(float(norm))
    out = {"step_ms": statistics.median(times[WARMUP:]), "step_ms_all": times,
           "losses": losses, "grad_norms": norms, "compile_s": compile_s,
           "devices": len(devices), "jax_version": jax.__version__,
           "base_kib": base_kib, "setup_peak_kib": setup_kib,
           "train_peak_kib": vm_hwm_kib(),
           "peak_kib_total": max(setup_kib, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss),
           "hlo_collectives": collectives}
    with open(out_path, "w") as f:
        json.dump(out, f)


# --------------------------------------------------------------------------
# PyTorch eager (one process on the whole thread budget; it has no tensor
# parallelism of its own, so it is the one peer of every layout)
# --------------------------------------------------------------------------
TORCH_MODES = ("fp32", "bf16-eager", "bf16-compile")


def run_torch(cfg, paths, args, mode="fp32"):
    """The PyTorch peer in one of TORCH_MODES: fp32 eager; bf16 autocast
    (torch.autocast("cpu", dtype=torch.bfloat16): fp32 parameters, bf16
    GEMMs), eager or under torch.compile."""
    spec = {"cfg": cfg, "steps": args.steps, "threads": args.threads,
            "model": paths["model"], "tokens": paths["tokens"], "mode": mode}
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    return run_worker("torch", f"torch-{mode}", spec, env, paths, args)


def torch_worker(spec_path, out_path):
    """GPT-2 as PyTorch users write it: F.scaled_dot_product_attention (causal),
    tanh GELU, F.cross_entropy over the real vocabulary, torch.optim.AdamW
    (foreach, no weight decay), the global gradient norm as the others log it."""
    import contextlib

    import torch
    import torch.nn.functional as F

    import safetensors_io
    import tokens_io

    with open(spec_path) as f:
        spec = json.load(f)
    torch.set_num_threads(spec["threads"])
    layers, heads, embd, vocab, ctx, seq, batch = spec["cfg"]
    params = {n: torch.from_numpy(a.copy()).requires_grad_()
              for n, a in safetensors_io.load_gpt2(spec["model"]).items()}

    def loss_fn(ids, targets):
        B, T = ids.shape
        x = params["wte.weight"][ids] + params["wpe.weight"][:T]
        for i in range(layers):
            p = lambda name: params[f"h.{i}.{name}"]  # noqa: E731
            h = F.layer_norm(x, (embd,), p("ln_1.weight"), p("ln_1.bias"), 1e-5)
            q, k, v = (h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")).split(embd, -1)
            q, k, v = (t.view(B, T, heads, embd // heads).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            a = a.transpose(1, 2).reshape(B, T, embd)
            x = x + (a @ p("attn.c_proj.weight") + p("attn.c_proj.bias"))
            h = F.layer_norm(x, (embd,), p("ln_2.weight"), p("ln_2.bias"), 1e-5)
            h = F.gelu(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"), approximate="tanh")
            x = x + (h @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias"))
        x = F.layer_norm(x, (embd,), params["ln_f.weight"], params["ln_f.bias"], 1e-5)
        logits = x @ params["wte.weight"].T
        return F.cross_entropy(logits.view(-1, vocab), targets.view(-1))

    mode = spec["mode"]
    forward = torch.compile(loss_fn) if mode == "bf16-compile" else loss_fn
    precision = (contextlib.nullcontext if mode == "fp32" else
                 lambda: torch.autocast("cpu", dtype=torch.bfloat16))
    optimizer = torch.optim.AdamW(params.values(), lr=LR, betas=(BETA1, BETA2), eps=EPS,
                                  weight_decay=0.0, foreach=True)
    tokens = tokens_io.read_tokens(spec["tokens"])
    times, losses, norms = [], [], []
    for s in range(spec["steps"]):
        ids, tg = (torch.from_numpy(a.astype("int64")) for a in
                   tokens_io.batch(tokens, s, batch, seq))
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with precision():
            loss = forward(ids, tg)
        loss.backward()
        norm = torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(t.grad) for t in params.values()]))
        optimizer.step()
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss))
        norms.append(float(norm))
    with open(out_path, "w") as f:
        json.dump({"step_ms": statistics.median(times[WARMUP:]), "step_ms_all": times,
                   "losses": losses, "grad_norms": norms, "torch_version": torch.__version__,
                   "threads": torch.get_num_threads()}, f)


def sgemm_gflops(threads, n=2048):
    """numpy's (OpenBLAS) sgemm rate on n-square matrices, best of 20, in a
    process on the same thread budget: the machine's peak the step rates are
    held against (main takes the better of a measurement before and one
    after the peers, as this VM's rate moves during a run)."""
    code = ("import numpy as np, time\n"
            f"a = np.random.rand({n}, {n}).astype(np.float32); b = a.copy(); a @ b\n"
            "best = min((lambda t: (a @ b, time.perf_counter() - t)[1])(time.perf_counter())"
            " for _ in range(20))\n"
            f"print(2 * {n} ** 3 / best / 1e9)")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    out = subprocess.run(affinity_prefix(threads) + [sys.executable, "-c", code], env=env,
                         check=True, capture_output=True, text=True).stdout
    return float(out)


def model_flops(name, paths):
    """FLOPs of one training step of the whole model: the one-rank step's
    count from its manifest (tp-explain's counting)."""
    manifest = json.loads(subprocess.run(
        [os.path.join(BIN, "megatron-compile"), os.path.join(paths["dir"], "gpt2.mlir"),
         "--train", "--emit=manifest", "-o", "-"],
        check=True, capture_output=True, text=True).stdout)
    return manifest["flops"]["train_step"]


# --------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------
def prepare(name, args, workdir, cfg=None):
    """Tokens, checkpoint and gpt2.mlir of one configuration (cfg, or
    CONFIGS[name])."""
    import numpy as np
    import safetensors_io
    import tokens_io
    from make_test_data import gpt2_init
    layers, heads, embd, vocab, ctx, seq, batch = cfg or CONFIGS[name]
    cdir = os.path.join(workdir, name)
    os.makedirs(cdir, exist_ok=True)
    paths = {"dir": cdir, "tokens": os.path.join(cdir, "tokens.bin"),
             "model": os.path.join(cdir, "model.safetensors")}
    tokens_io.write_tokens(paths["tokens"], np.random.RandomState(0).randint(
        0, vocab, size=args.steps * batch * seq + 1))
    params = gpt2_init(layers, embd, vocab, ctx, seed=0)
    safetensors_io.save_gpt2(paths["model"], params, {
        "format": "pt", "n_layer": layers, "n_head": heads, "n_embd": embd,
        "vocab_size": vocab, "padded_vocab_size": vocab, "n_ctx": ctx, "seed": 0})
    del params
    with open(os.path.join(cdir, "gpt2.mlir"), "w") as f:
        subprocess.run([os.path.join(BIN, "gpt2-mlir"), f"--layers={layers}",
                        f"--heads={heads}", f"--embd={embd}", f"--vocab={vocab}",
                        f"--ctx={ctx}", f"--seq={seq}", f"--batch={batch}"],
                       stdout=f, check=True)
    return paths


def run_config(name, args, workdir):
    cfg = CONFIGS[name]
    layers, heads, embd, vocab, ctx, seq, batch = cfg
    paths = prepare(name, args, workdir)
    flops = model_flops(name, paths)
    torch_peer = run_torch(cfg, paths, args) if args.torch else None
    rows = []
    for dp, tp in args.layouts:
        if heads % tp or batch % dp:
            print(f"{name}: {tag(dp, tp)} does not divide {heads} heads and batch {batch}, "
                  "skipped", file=sys.stderr)
            continue
        step, compile_s, manifest, report = compile_ours(cfg, paths["dir"], dp, tp)
        wte = next(a for a in manifest["args"] if a["name"] == "wte.weight")
        padded = wte["global_shape"][0]
        ours = run_ours(step, dp, tp, paths, args)
        ours.update(compile_s=compile_s,
                    comm_elements_per_rank_per_step=report["comm_elements_per_rank_per_step"])
        theirs = run_jax(cfg, dp, tp, padded, paths, args)
        diffs = [abs(a - b) / max(abs(b), 1e-30)
                 for a, b in zip(ours["losses"], theirs["losses"])]
        norm_diffs = [abs(a - b) / max(abs(b), 1e-30)
                      for a, b in zip(ours["grad_norms"], theirs["grad_norms"])]
        torch_diffs = [abs(a - b) / max(abs(b), 1e-30)
                       for a, b in zip(ours["losses"], torch_peer["losses"])] if torch_peer else []
        rows.append({"config": name, "dp": dp, "tp": tp, "layout": tag(dp, tp),
                     "model_flops_per_step": flops, "torch": torch_peer,
                     "torch_loss_max_rel_diff": max(torch_diffs) if torch_diffs else None,
                     "layers": layers, "heads": heads,
                     "embd": embd, "vocab": vocab, "padded_vocab": padded, "seq": seq,
                     "batch": batch, "tokens_per_step": batch * seq, "steps": args.steps,
                     "ours": ours, "jax": theirs,
                     "loss_max_rel_diff": max(diffs) if diffs else None,
                     "grad_norm_max_rel_diff": max(norm_diffs) if norm_diffs else None})
        print(f"  done {name} {tag(dp, tp)}: ours {ours['step_ms']:.1f} ms, "
              f"JAX {theirs['step_ms']:.1f} ms", file=sys.stderr, flush=True)
    return rows


def print_table(rows, args):
    print(f"GPT-2 training on CPU ({os.cpu_count()} cores, thread budget {args.threads}); "
          f"median step time of steps {WARMUP}..{args.steps - 1}; "
          f"peak RSS in MiB")
    print("  ours: megatron-run on N MPI ranks (peak per rank, max over ranks; total = sum)")
    print("  JAX:  one process with N host devices (peak = process total, compilation "
          "included; run = peak of the steps alone; base = after importing JAX)")
    print(f"{'config':>6} {'DxT':>3} | {'ours ms':>8} {'tok/s':>8} {'MiB/rank':>8} "
          f"{'MiB tot':>8} | {'JAX ms':>8} {'tok/s':>8} {'MiB tot':>8} {'run':>7} {'base':>5} | "
          f"{'speed o/J':>9} {'mem o/J':>7} {'vs run':>6} | {'loss rel diff':>13}")
    for r in rows:
        o, j = r["ours"], r["jax"]
        tok = r["tokens_per_step"]
        print(f"{r['config']:>6} {r['layout']:>3} | {o['step_ms']:8.1f} "
              f"{tok / o['step_ms'] * 1e3:8.0f} {max(o['peak_kib_per_rank']) / 1024:8.1f} "
              f"{o['peak_kib_total'] / 1024:8.1f} | {j['step_ms']:8.1f} "
              f"{tok / j['step_ms'] * 1e3:8.0f} {j['peak_kib_total'] / 1024:8.1f} "
              f"{j['train_peak_kib'] / 1024:7.1f} {j['base_kib'] / 1024:5.0f} | "
              f"{j['step_ms'] / o['step_ms']:9.2f} "
              f"{o['peak_kib_total'] / j['peak_kib_total']:7.2f} "
              f"{o['peak_kib_total'] / j['train_peak_kib']:6.2f} | "
              f"{r['loss_max_rel_diff']:13.1e}")
    print("  speed o/J = JAX ms / ours ms (> 1: ours faster); mem o/J = ours total / JAX total "
          "(< 1: ours smaller); vs run = ours total / JAX run peak")
    for r in rows:
        if r["dp"] * r["tp"] > 1:
            kinds = ", ".join(f"{k} x{v['count']} ({v['elements']} el)"
                              for k, v in sorted(r["jax"]["hlo_collectives"].items()))
            print(f"  {r['config']} {r['layout']}: ours {r['ours']['comm_elements_per_rank_per_step']}"
                  f" f32 elements/rank/step (tp-explain); JAX HLO: {kinds or 'none'}")


def print_rates(rows, peak, args):
    """Model FLOP rates of the three in the same run, against the sgemm peak."""
    print(f"Model FLOP rate (GFLOP/s of the whole step) and share of numpy's "
          f"2048-square sgemm on the same {args.threads} threads: {peak:.1f} GFLOP/s")
    print(f"{'config':>6} {'DxT':>3} | {'GFLOP':>7} | {'ours':>7} {'%peak':>5} | "
          f"{'JAX':>7} {'%peak':>5} | {'torch':>7} {'%peak':>5} | {'speed o/J':>9} "
          f"{'o/torch':>7} | {'loss rel diff torch':>19}")
    for r in rows:
        rate = lambda peer: r["model_flops_per_step"] / peer["step_ms"] / 1e6  # noqa: E731
        line = (f"{r['config']:>6} {r['layout']:>3} | {r['model_flops_per_step'] / 1e9:7.1f} | "
                f"{rate(r['ours']):7.1f} {100 * rate(r['ours']) / peak:5.1f} | "
                f"{rate(r['jax']):7.1f} {100 * rate(r['jax']) / peak:5.1f} | ")
        if r["torch"]:
            line += (f"{rate(r['torch']):7.1f} {100 * rate(r['torch']) / peak:5.1f} | "
                     f"{r['jax']['step_ms'] / r['ours']['step_ms']:9.2f} "
                     f"{r['torch']['step_ms'] / r['ours']['step_ms']:7.2f} | "
                     f"{r['torch_loss_max_rel_diff']:19.1e}")
        else:
            line += (f"{'-':>7} {'-':>5} | {r['jax']['step_ms'] / r['ours']['step_ms']:9.2f} "
                     f"{'-':>7} | {'-':>19}")
        print(line)
    print("  speed o/X = X's step time / ours (> 1: ours faster); torch is one process "
          "on the whole thread budget at every layout (it has no tensor parallelism)")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--jax-worker":
        jax_worker(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--torch-worker":
        torch_worker(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help="comma-separated, from " + ", ".join(CONFIGS) + " (default all)")
    parser.add_argument("--layouts", default="1x1,1x2",
                        help="DxT layouts: D data-parallel groups of T tensor-parallel "
                             "ranks (default %(default)s)")
    parser.add_argument("--steps", type=int, default=10,
                        help=f"training steps; the first {WARMUP} are left out of the medians")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="total thread budget (default: all cores)")
    parser.add_argument("--jax-xla-flags", default="", help="extra XLA_FLAGS for JAX")
    parser.add_argument("--mpi-args", default="",
                        help="extra mpirun arguments, e.g. '--mca mpi_yield_when_idle 1'")
    parser.add_argument("--no-torch", dest="torch", action="store_false",
                        help="leave out the PyTorch eager peer (installed from "
                             "bench/requirements-decode.txt otherwise)")
    parser.add_argument("--json", help="write the numbers to this file")
    parser.add_argument("--keep", help="keep checkpoints, IR, step.so, logs and JAX's compiled "
                                       "HLO (jax-tpN.hlo.txt) in this directory")
    args = parser.parse_args()
    try:
        args.layouts = [tuple(int(n) for n in t.split("x")) for t in args.layouts.split(",") if t]
        if any(len(l) != 2 or min(l) < 1 for l in args.layouts):
            raise ValueError
    except ValueError:
        parser.error(f"--layouts: expected DxT,... (e.g. 1x2,2x1), got {args.layouts!r}")
    names = [c for c in args.configs.split(",") if c]
    for c in names:
        if c not in CONFIGS:
            parser.error(f"unknown config {c}")
    if args.steps <= WARMUP:
        parser.error(f"--steps must be > {WARMUP}")
    if args.torch:
        ensure_torch()
    rows = []
    peak = sgemm_gflops(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.keep or tmp
        for c in names:
            rows += run_config(c, args, workdir)
    peak = max(peak, sgemm_gflops(args.threads))
    print_table(rows, args)
    print_rates(rows, peak, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "train_compare", "cpus": os.cpu_count(),
                       "sgemm_gflops": peak,
                       "threads": args.threads, "steps": args.steps, "warmup": WARMUP,
                       "lr": LR, "results": rows}, f, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
