#!/usr/bin/env python3
"""GPT-2 decoding on CPU: our compiled generation step (megatron-run
--generate, TP=1 and TP=2 under MPI) beside PyTorch eager with a KV cache,
in the same run, on the same random 124M-shaped checkpoint, greedy, at batch
1 and 8. Prints the decode tokens/s of each and the ours/PyTorch ratio, and
checks that both generate the same tokens.

  bench/cpu/decode_compare.py [--batches 1,8] [--tps 1,2] [--prompt 32]
      [--new 64] [--layers 12] [--threads T] [--json FILE] [--keep DIR]
      [--device cuda --prebuilt DIR --megatron-run CMD]

On a GPU (bench/gpu/run.sh's decode stage) PyTorch runs on --device cuda
and ours runs the CUDA generation steps bench/gpu/prepare.sh compiled
(--prebuilt DIR holding gen-b<B>-tp1.so) through the bundle's megatron-run
(--megatron-run), at TP=1.

Decode tokens/s counts the tokens after each sequence's first new one (which
the prompt's prefill chose) over the time of the decode steps alone:
megatron-run's "decode_tokens_per_second", and for PyTorch the wall time of
its decode loop, the same tokens.

ours:    gpt2-mlir --preset=124M --generate --batch B --seq P (the prompt is
         one prefill chunk) -> megatron-compile --generate --tp=T ->
         [mpirun -np T] megatron-run --init-from model.safetensors
         --generate --prompts-file (B prompts of P byte tokens)
         --max-new N --temperature 0
PyTorch: the same model (GPT-2's blocks, Conv1D layout, tanh GELU, tied LM
         head) with a preallocated [B, H, ctx, D] key and value cache per
         layer, torch.inference_mode, F.scaled_dot_product_attention over the
         cached positions, argmax over the vocabulary's columns; one prefill
         call on the prompt, then N-1 decode calls of one token.

Threads: the machine's cores (or --threads T): PyTorch uses T intra-op
threads; ours T // ranks OpenMP/BLAS threads per rank.

Needs torch (installed here from bench/requirements-decode.txt) and the
project built (scripts/build.sh).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "utils", "gpt2_reference"))

import numpy as np  # noqa: E402

from safetensors_io import load_gpt2  # noqa: E402
from torch_peer import ensure_torch  # noqa: E402

BIN = os.path.join(ROOT, "build", "bin")
HEADS, EMBD, VOCAB, CTX = 12, 768, 50257, 1024


def run(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return out.stdout


def prompts(batch, length):
    """Batch prompts of `length` printable bytes, each its own."""
    rng = np.random.default_rng(0)
    return [bytes(rng.integers(97, 123, length, dtype=np.uint8)) for _ in range(batch)]


def compile_generation(stem, batch, tp, prompt, layers, target="cpu"):
    """gpt2-mlir --generate and megatron-compile --generate into STEM.so."""
    run([os.path.join(BIN, "gpt2-mlir"), "--preset=124M", f"--layers={layers}",
         "--generate", f"--batch={batch}", f"--seq={prompt}", "-o", stem + ".mlir"])
    run([os.path.join(BIN, "megatron-compile"), stem + ".mlir", f"--tp={tp}",
         "--generate", f"--target={target}", "-o", stem + ".so"])


def ours(work, batch, tp, prompt_bytes, new, args):
    stem = os.path.join(work, f"gen-b{batch}-tp{tp}")
    library = stem + ".so"
    if args.prebuilt:
        library = os.path.join(args.prebuilt, f"gen-b{batch}-tp{tp}.so")
    else:
        compile_generation(stem, batch, tp, len(prompt_bytes[0]), args.layers)
    with open(stem + ".txt", "wb") as f:
        f.write(b"\n".join(prompt_bytes) + b"\n")
    per_rank = str(max(1, args.threads // tp))
    env = dict(os.environ, OMP_NUM_THREADS=per_rank, OPENBLAS_NUM_THREADS=per_rank,
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = args.megatron_run.split() + [library, "--generate",
           "--init-from", os.path.join(work, "model.safetensors"),
           "--prompts-file", stem + ".txt", "--max-new", str(new),
           "--temperature", "0"]
    if tp > 1:
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(tp)] + cmd
    result = json.loads(run(cmd, env).strip().splitlines()[-1])
    return result["decode_tokens_per_second"], result["generated"]


class TorchGPT2:
    """GPT-2 with a KV cache, from a checkpoint's arrays."""

    def __init__(self, params, heads, batch, device):
        import torch
        self.torch = torch
        self.p = {n: torch.from_numpy(np.ascontiguousarray(v)).to(device)
                  for n, v in params.items()}
        self.layers = sum(1 for n in params if n.endswith(".ln_1.weight"))
        self.heads, self.embd = heads, self.p["wte.weight"].shape[1]
        d = self.embd // heads
        self.k = [torch.zeros(batch, heads, CTX, d, device=device)
                  for _ in range(self.layers)]
        self.v = [torch.zeros(batch, heads, CTX, d, device=device)
                  for _ in range(self.layers)]

    def ln(self, x, name):
        return self.torch.nn.functional.layer_norm(
            x, (self.embd,), self.p[name + ".weight"], self.p[name + ".bias"], 1e-5)

    def linear(self, x, name):
        return self.torch.addmm(self.p[name + ".bias"], x.reshape(-1, x.shape[-1]),
                                self.p[name + ".weight"]).reshape(*x.shape[:-1], -1)

    def forward(self, ids, start):
        """Logits of the last position of ids [B, T] at positions start.."""
        F = self.torch.nn.functional
        B, T = ids.shape
        x = self.p["wte.weight"][ids] + self.p["wpe.weight"][start:start + T]
        d = self.embd // self.heads
        for i in range(self.layers):
            h = f"h.{i}."
            qkv = self.linear(self.ln(x, h + "ln_1"), h + "attn.c_attn")
            q, k, v = (t.reshape(B, T, self.heads, d).transpose(1, 2)
                       for t in qkv.split(self.embd, dim=2))
            self.k[i][:, :, start:start + T] = k
            self.v[i][:, :, start:start + T] = v
            keys, values = self.k[i][:, :, :start + T], self.v[i][:, :, :start + T]
            # Causal over the chunk; a single new token sees every position.
            a = F.scaled_dot_product_attention(q, keys, values, is_causal=T > 1)
            a = a.transpose(1, 2).reshape(B, T, self.embd)
            x = x + self.linear(a, h + "attn.c_proj")
            m = F.gelu(self.linear(self.ln(x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh")
            x = x + self.linear(m, h + "mlp.c_proj")
        x = self.ln(x[:, -1], "ln_f")
        return x @ self.p["wte.weight"][:VOCAB].T


def pytorch(work, batch, prompt_bytes, new, threads, device):
    import torch
    torch.set_num_threads(threads)
    model = TorchGPT2(load_gpt2(os.path.join(work, "model.safetensors")), HEADS, batch,
                      device)
    ids = torch.tensor([list(p) for p in prompt_bytes], dtype=torch.long, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    generated = []
    with torch.inference_mode():
        token = model.forward(ids, 0).argmax(-1)
        generated.append(token)
        position = ids.shape[1]
        sync()
        begin = time.perf_counter()
        for _ in range(new - 1):
            token = model.forward(token[:, None], position).argmax(-1)
            generated.append(token)
            position += 1
        sync()
        seconds = time.perf_counter() - begin
    tokens = torch.stack(generated, 1).tolist()
    return batch * (new - 1) / seconds, tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--tps", default="1,2")
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json")
    ap.add_argument("--keep")
    ap.add_argument("--device", default="cpu", help="PyTorch's device")
    ap.add_argument("--prebuilt", help="directory of compiled gen-b<B>-tp<T>.so")
    ap.add_argument("--megatron-run", default=os.path.join(BIN, "megatron-run"))
    ap.add_argument("--compile-only", metavar="DIR",
                    help="compile the CUDA generation steps into DIR and stop "
                         "(bench/gpu/prepare.sh)")
    args = ap.parse_args()
    if args.compile_only:
        os.makedirs(args.compile_only, exist_ok=True)
        for batch in map(int, args.batches.split(",")):
            compile_generation(os.path.join(args.compile_only, f"gen-b{batch}-tp1"), batch,
                               1, args.prompt, args.layers, target="cuda")
        return
    ensure_torch()
    work = args.keep or tempfile.mkdtemp(prefix="decode_compare.")
    os.makedirs(work, exist_ok=True)
    run([sys.executable, os.path.join(ROOT, "utils", "gpt2_reference", "make_test_data.py"),
         "--out-dir", work, "--layers", str(args.layers), "--heads", str(HEADS),
         "--embd", str(EMBD), "--vocab", str(VOCAB), "--ctx", str(CTX), "--tokens", "64",
         "--seed", "0"])
    rows = []
    where = "cuda" if args.device == "cuda" else f"{args.threads} threads"
    print(f"GPT-2 124M shape ({args.layers} layers), prompt {args.prompt}, "
          f"{args.new} new tokens, greedy, {where}; decode tokens/s")
    for batch in map(int, args.batches.split(",")):
        prompt_bytes = prompts(batch, args.prompt)
        theirs, their_tokens = pytorch(work, batch, prompt_bytes, args.new, args.threads,
                                       args.device)
        for tp in map(int, args.tps.split(",")):
            rate, tokens = ours(work, batch, tp, prompt_bytes, args.new, args)
            same = tokens == their_tokens
            rows.append({"batch": batch, "tp": tp, "ours": rate, "pytorch": theirs,
                         "ratio": rate / theirs, "same_tokens": same})
            print(f"batch {batch} tp {tp}: ours {rate:9.1f}  pytorch {theirs:9.1f}  "
                  f"ours/pytorch {rate / theirs:5.2f}  same tokens: {same}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d"), "results": rows}, f, indent=2)
    if not all(r["same_tokens"] for r in rows):
        sys.exit("decode_compare.py: the two generated different tokens")


if __name__ == "__main__":
    main()
