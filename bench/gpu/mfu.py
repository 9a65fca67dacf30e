#!/usr/bin/env python3
"""GPT-2 sizes, FLOPs per token, throughput and MFU: the one place where the
benchmark's formulas live (torch_gpt2.py, kernels.py and report.py import
it). Standard library only, so it runs where torch is absent.

FLOPs per token follow llm.c (gpt2_estimate_mfu in train_gpt2.cu):

    flops_per_token = 6 * N + 6 * L * C * T

N = number of parameters of the model as run (the embedding is tied to the
LM head, so it stays in N), L layers, C embedding width, T sequence length.
The first term is every weight GEMM, forward and backward; the second the
attention GEMMs (QK^T and PV) with causal masking counted as half.
One difference of bookkeeping from llm.c: llm.c's N counts its wte at the
padded vocabulary 50304; here N counts wte at the rows the step really has
(our step at TP=1 keeps 50257, and the PyTorch model is built with the same
rows), so both sides are charged for the model they run.

    MFU = tokens_per_s * flops_per_token / peak_flops

with peak_flops the card's bf16 dense matmul rate measured by
peak_matmul.py (not the datasheet's).

  python3 bench/gpu/mfu.py --preset 124M --seq 1024   # N and FLOPs per token
"""
import argparse
import json
import statistics

# name: (layers, heads, embd, vocab, ctx), as gpt2-mlir's --preset
# (lib/Models/GPT2.cpp; vocab 50257 and ctx 1024 unless the preset says).
PRESETS = {
    "tiny": (2, 4, 64, 512, 64),
    "124M": (12, 12, 768, 50257, 1024),
    "350M": (24, 16, 1024, 50257, 1024),
    "774M": (36, 20, 1280, 50257, 1024),
    "1558M": (48, 25, 1600, 50257, 1024),
}


def preset(name):
    """(layers, heads, embd, vocab, ctx) of a gpt2-mlir preset."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}")
    return PRESETS[name]


def n_params(layers, embd, vocab_rows, ctx):
    """Parameters of GPT-2 with a tied LM head: wte [V, C], wpe [ctx, C],
    per block ln_1, c_attn [C, 3C] + bias, attn.c_proj, ln_2, c_fc [C, 4C] +
    bias, mlp.c_proj (12 C^2 + 13 C), and ln_f. 124M: 124,439,808 (as
    `gpt2-mlir --preset=124M --print-params`)."""
    per_block = 12 * embd * embd + 13 * embd
    return vocab_rows * embd + ctx * embd + layers * per_block + 2 * embd


def flops_per_token(params, layers, embd, seq):
    """llm.c's training FLOPs per token (forward + backward)."""
    return 6 * params + 6 * layers * embd * seq


def mfu(tokens_per_s, flops_token, peak_flops):
    """Model FLOPs utilisation in [0, 1]; None without a peak."""
    if not peak_flops or tokens_per_s is None:
        return None
    return tokens_per_s * flops_token / peak_flops


def step_summary(step_ms, warmup, tokens_per_step):
    """Throughput of the steps after the first `warmup`: tokens/s is total
    tokens over total time of the timed steps (a mean rate, as llm.c and
    nanoGPT print); the median step time is given beside it because single
    steps on a shared machine can stall."""
    timed = [float(ms) for ms in step_ms[warmup:]]
    if not timed:
        raise ValueError(f"no timed steps: {len(step_ms)} steps, warmup {warmup}")
    total_s = sum(timed) / 1e3
    return {
        "timed_steps": len(timed),
        "warmup_steps": warmup,
        "step_ms_median": statistics.median(timed),
        "step_ms_mean": statistics.fmean(timed),
        "step_ms_min": min(timed),
        "step_ms_max": max(timed),
        "tokens_per_step": tokens_per_step,
        "tokens_per_s": tokens_per_step * len(timed) / total_s,
    }


def model_figures(layers, embd, vocab_rows, ctx, seq):
    """The numbers a report quotes for one model configuration."""
    n = n_params(layers, embd, vocab_rows, ctx)
    return {"params": n, "vocab_rows": vocab_rows,
            "flops_per_token": flops_per_token(n, layers, embd, seq)}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="124M", choices=list(PRESETS))
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--vocab-rows", type=int, help="rows of wte (default: the preset's vocab)")
    parser.add_argument("--tokens-per-s", type=float, help="also print the MFU of this rate")
    parser.add_argument("--peak-tflops", type=float, help="peak for --tokens-per-s")
    args = parser.parse_args()
    layers, _, embd, vocab, ctx = preset(args.preset)
    out = model_figures(layers, embd, args.vocab_rows or vocab, ctx, args.seq)
    out.update(preset=args.preset, seq=args.seq)
    if args.tokens_per_s is not None:
        peak = args.peak_tflops * 1e12 if args.peak_tflops else None
        out["mfu"] = mfu(args.tokens_per_s, out["flops_per_token"], peak)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
