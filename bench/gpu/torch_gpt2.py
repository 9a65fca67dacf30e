#!/usr/bin/env python3
"""GPT-2 training in PyTorch: the peer of our compiled step in the GPU
benchmark (bench/gpu/run.sh). The architecture is the JAX reference's
(utils/gpt2_reference/gpt2_jax.py) with the same parameter names and shapes:
pre-LN blocks, fused c_attn [C, 3C] in Conv1D layout (y = x @ W + b), causal
attention with scale 1/sqrt(D) (F.scaled_dot_product_attention), tanh GELU,
layer norm eps 1e-5, LM head tied to wte, mean cross-entropy over the first
`vocab` logits (padded wte rows never enter the softmax). GPT-2 init:
N(0, 0.02), c_proj weights N(0, 0.02/sqrt(2L)), biases 0, LN weight 1.

Training step: forward + loss under bf16 autocast (parameters, gradients and
AdamW state stay fp32: the "master weights"), backward, global-norm clipping
(clip_grad_norm_; with --grad-clip 0 the norm is still computed, as our step
does), torch.optim.AdamW (fused on CUDA) with weight decay on 2-D weights
only (the reference's rule), zero_grad. The loss and gradient norm are read
back every step (megatron-run prints both per step, so both sides pay one
host synchronisation per step).

Timing: wall time of each step, synchronised, from its start to the read
back; the first --warmup steps (torch.compile's compilation, cuBLAS and
allocator warm-up) are left out; tokens/s = timed tokens / timed seconds
(mfu.step_summary).

  python3 bench/gpu/torch_gpt2.py --preset 124M --batch 16 --seq 1024 \
      --steps 20 --warmup 3 [--compile] [--dtype bf16|fp32] [--data tokens.bin]

Prints progress on stderr and one JSON line on stdout (also --json-out FILE).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The batching rule megatron-run and the JAX reference share.
sys.path.insert(0, os.path.join(HERE, "..", "..", "utils", "gpt2_reference"))
import mfu  # noqa: E402
from tokens_io import batch, read_tokens  # noqa: E402

LN_EPS = 1e-5


# --------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------
class Conv1D(nn.Module):
    """GPT-2's linear layer: weight [in, out] (Hugging Face layout, as the
    reference and our checkpoints), y = x @ W + b."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        # F.linear wants [out, in]; the transposed view costs nothing (cuBLAS
        # takes the transpose as a flag) and keeps the bias in the GEMM.
        return F.linear(x, self.weight.t(), self.bias)


class Block(nn.Module):
    def __init__(self, embd, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(embd, eps=LN_EPS)
        self.attn = nn.Module()
        self.attn.c_attn = Conv1D(embd, 3 * embd)
        self.attn.c_proj = Conv1D(embd, embd)
        self.ln_2 = nn.LayerNorm(embd, eps=LN_EPS)
        self.mlp = nn.Module()
        self.mlp.c_fc = Conv1D(embd, 4 * embd)
        self.mlp.c_proj = Conv1D(4 * embd, embd)

    def attention(self, x):
        B, T, C = x.shape
        # Head h = columns h*D:(h+1)*D of each of the q, k, v sections.
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/sqrt(D)
        return self.attn.c_proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        h = F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.mlp.c_proj(h)


class GPT2(nn.Module):
    def __init__(self, layers, heads, embd, vocab, vocab_rows, ctx):
        super().__init__()
        self.vocab = vocab
        self.wte = nn.Embedding(vocab_rows, embd)
        self.wpe = nn.Embedding(ctx, embd)
        self.h = nn.ModuleList(Block(embd, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(embd, eps=LN_EPS)

    def forward(self, ids, targets):
        """Mean cross-entropy over all B*T tokens."""
        T = ids.shape[1]
        x = self.wte(ids) + self.wpe.weight[:T]
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)     # tied head
        if logits.shape[-1] > self.vocab:                     # padded rows out
            logits = logits[..., :self.vocab]
        return F.cross_entropy(logits.reshape(-1, self.vocab).float(), targets.reshape(-1))


def init_gpt2(model, layers, seed):
    """The reference's GPT-2 initialisation (make_test_data.gpt2_init rules)."""
    gen = torch.Generator(device=model.wte.weight.device).manual_seed(seed)
    proj_std = 0.02 / math.sqrt(2 * layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in f".{name}" and name.endswith(".weight"):   # ln_1, ln_2, ln_f
                p.fill_(1.0)
            elif p.dim() == 2:
                p.normal_(0.0, proj_std if name.endswith("c_proj.weight") else 0.02, generator=gen)
            else:
                p.zero_()


def param_shapes(model):
    """{name: shape} with the reference's names (wte.weight, h.0.attn.c_attn.weight, ...)."""
    return {n: list(p.shape) for n, p in model.named_parameters()}


# --------------------------------------------------------------------------
# data: llm.c token files and megatron-run's batching rule
# --------------------------------------------------------------------------
def make_batches(args, vocab, device):
    if args.data:
        tokens = read_tokens(args.data)
    else:
        tokens = np.random.default_rng(args.seed).integers(
            0, vocab, size=args.batch * args.seq * (args.steps + args.warmup) + 1).astype(np.uint16)
    if int(tokens.max()) >= vocab:
        raise SystemExit(f"token id {int(tokens.max())} >= vocabulary {vocab}")
    out = []
    for s in range(args.warmup + args.steps):
        ids, tgt = batch(tokens, s, args.batch, args.seq)
        out.append((torch.from_numpy(ids).long().to(device),
                    torch.from_numpy(tgt).long().to(device)))
    return out


# --------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------
def make_optimizer(model, args, device):
    """AdamW, weight decay on 2-D weights only; fused kernels on CUDA."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay},
              {"params": rest, "weight_decay": 0.0}]
    fused = device.type == "cuda" if args.fused == "auto" else args.fused == "on"
    return torch.optim.AdamW(groups, lr=args.lr, betas=(args.beta1, args.beta2),
                             eps=args.eps, fused=fused), fused


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(model, loss_fn, opt, batches, args, device):
    """Returns per-step (ms, loss, grad_norm)."""
    params = list(model.parameters())
    clip = args.grad_clip if args.grad_clip > 0 else math.inf   # norm always computed
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.dtype == "bf16")
    records = []
    for s, (ids, tgt) in enumerate(batches):
        synchronize(device)
        t0 = time.perf_counter()
        with autocast:
            loss = loss_fn(ids, tgt)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_v, norm_v = torch.stack([loss.detach().float(), norm.float()]).tolist()
        ms = (time.perf_counter() - t0) * 1e3
        records.append((ms, loss_v, norm_v))
        print(f"step {s} loss {loss_v:.6f} grad_norm {norm_v:.4f} ms {ms:.3f}"
              f"{' (warmup)' if s < args.warmup else ''}", file=sys.stderr, flush=True)
    return records


def pick_device(name):
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def model_config(args, check_seq=True):
    layers, heads, embd, vocab, ctx = mfu.preset(args.preset)
    layers = args.layers or layers
    heads = args.heads or heads
    embd = args.embd or embd
    vocab = args.vocab or vocab
    ctx = args.ctx or ctx
    rows = args.vocab_rows or vocab
    if rows < vocab or embd % heads or (check_seq and args.seq > ctx):
        raise SystemExit(f"need vocab_rows >= vocab ({rows} < {vocab}?), heads dividing embd "
                         f"({embd} % {heads}?), seq <= ctx ({args.seq} > {ctx}?)")
    return layers, heads, embd, vocab, rows, ctx


def run(args):
    device = pick_device(args.device)
    if args.compile and device.type != "cuda":
        print("note: --compile on CPU needs a C++ compiler and is slow", file=sys.stderr)
    layers, heads, embd, vocab, rows, ctx = model_config(args)
    torch.manual_seed(args.seed)
    with torch.device(device):
        model = GPT2(layers, heads, embd, vocab, rows, ctx)
    init_gpt2(model, layers, args.seed)
    loss_fn = torch.compile(model) if args.compile else model
    opt, fused = make_optimizer(model, args, device)
    batches = make_batches(args, vocab, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    records = train(model, loss_fn, opt, batches, args, device)
    wall_s = time.perf_counter() - start

    figures = mfu.model_figures(layers, embd, rows, ctx, args.seq)
    summary = mfu.step_summary([r[0] for r in records], args.warmup, args.batch * args.seq)
    peak = args.peak_tflops * 1e12 if args.peak_tflops else None
    out = {
        "impl": "torch.compile" if args.compile else "torch eager",
        "preset": args.preset, "layers": layers, "heads": heads, "embd": embd,
        "vocab": vocab, "vocab_rows": rows, "ctx": ctx, "batch": args.batch, "seq": args.seq,
        "dtype": args.dtype, "compile": args.compile,
        "compile_mode": args.compile_mode if args.compile else None,
        "fused_adamw": fused, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch_version": torch.__version__,
        "hyperparameters": {"lr": args.lr, "beta1": args.beta1, "beta2": args.beta2,
                            "eps": args.eps, "weight_decay": args.weight_decay,
                            "grad_clip": args.grad_clip, "seed": args.seed},
        **figures, **summary,
        "mfu": mfu.mfu(summary["tokens_per_s"], figures["flops_per_token"], peak),
        "peak_tflops": args.peak_tflops,
        "wall_s": wall_s,
        "peak_memory_gib": (torch.cuda.max_memory_reserved(device) / 2**30
                            if device.type == "cuda" else None),
        "peak_memory_allocated_gib": (torch.cuda.max_memory_allocated(device) / 2**30
                                      if device.type == "cuda" else None),
        "step_ms_all": [r[0] for r in records],
        "losses": [r[1] for r in records],
        "grad_norms": [r[2] for r in records],
    }
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="124M", choices=list(mfu.PRESETS))
    for flag in ("layers", "heads", "embd", "vocab", "ctx"):
        p.add_argument(f"--{flag}", type=int, help=f"override the preset's {flag}")
    p.add_argument("--vocab-rows", type=int,
                   help="rows of wte (padded vocabulary; default --vocab): use our step's")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before them")
    p.add_argument("--compile", action="store_true", help="torch.compile the model and loss")
    p.add_argument("--compile-mode", default="default",
                   help="torch.compile mode (default, max-autotune-no-cudagraphs, ...)")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16",
                   help="bf16: autocast with fp32 master weights; fp32: no autocast")
    p.add_argument("--device", default="auto", help="auto, cuda, cpu")
    p.add_argument("--data", help="llm.c token file (default: random tokens)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--grad-clip", type=float, default=0.0, help="0: no clipping (norm still computed)")
    p.add_argument("--fused", choices=["auto", "on", "off"], default="auto",
                   help="fused AdamW (auto: on CUDA)")
    p.add_argument("--peak-tflops", type=float, help="measured bf16 peak, for the MFU field")
    p.add_argument("--json-out", help="also write the JSON result here")
    p.add_argument("--print-params", action="store_true",
                   help="print the parameter names and shapes and exit")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.print_params:
        layers, heads, embd, vocab, rows, ctx = model_config(args, check_seq=False)
        with torch.device("meta"):
            model = GPT2(layers, heads, embd, vocab, rows, ctx)
        shapes = param_shapes(model)
        for name, shape in shapes.items():
            print(name, shape, math.prod(shape))
        print("total parameters:", sum(math.prod(s) for s in shapes.values()))
        return
    out = run(args)
    line = json.dumps(out)
    if args.json_out:
        with open(args.json_out, "w") as f:
            f.write(line + "\n")
    print(line, flush=True)


if __name__ == "__main__":
    main()
