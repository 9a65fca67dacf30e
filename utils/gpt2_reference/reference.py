#!/usr/bin/env python3
"""Reference GPT-2 numbers for the compiled training step (JAX, fp32).

  reference.py eval  --model M --data D --batch B --seq T --heads H \
                     --valid-vocab V --steps S [--dump-logits F.npy]
      -> "step S loss X" per step (fixed params, batch s for step s)
  reference.py grads --model M --data D --batch B --seq T --heads H \
                     --valid-vocab V --out grads.safetensors [--step 0]
      -> "step S loss X"; writes d(loss of that step)/d(param) per parameter
  reference.py train --model M --data D --batch B --seq T --heads H \
                     --valid-vocab V --steps 10 --lr 1e-4 [--beta1 0.9 \
                     --beta2 0.999 --eps 1e-8 --weight-decay 0 --grad-clip 1]
      -> "step S loss X grad_norm G" per step (torch.optim.AdamW semantics)
  reference.py generate --model M --prompts P.txt --max-new N --heads H \
                     --valid-vocab V [--temperature 0 --top-k 0 --top-p 1 \
                     --seed S]
      -> {"generated": [[ids...], ...]}: each line of P.txt (byte tokens)
         continued by N tokens, each from a full forward pass over the
         sequence so far (no KV cache); greedy at temperature 0, else
         megatron-run's Gumbel-max sampling (sampling.py) on the same logits

Numbers are printed with repr() of the float32 value (exact). --heads
defaults to the checkpoint's n_head metadata, --valid-vocab to its
vocab_size metadata (else the number of wte rows).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import gpt2_jax  # noqa: E402
from safetensors_io import load_gpt2, save_gpt2  # noqa: E402
from reference_cli import (Family, Loaded, add_sampling_options,  # noqa: E402
                           add_training_commands)
from tokens_io import read_tokens  # noqa: E402


def _common(p):
    p.add_argument("--model", required=True, help="model.safetensors")
    p.add_argument("--data", required=True, help="llm.c token file")
    p.add_argument("--batch", "-B", type=int, required=True)
    p.add_argument("--seq", "-T", type=int, required=True)
    p.add_argument("--heads", type=int, default=None)
    p.add_argument("--valid-vocab", type=int, default=None)
    p.add_argument("--timing", action="store_true",
                   help="print timings to stderr")


def _load(a):
    params, info = load_gpt2(a.model, with_info=True)
    meta = info["metadata"]
    heads = a.heads if a.heads is not None else int(meta.get("n_head", 0)) or None
    if heads is None:
        sys.exit("error: --heads is required (no n_head in checkpoint metadata)")
    if info["n_embd"] % heads:
        sys.exit(f"error: n_embd {info['n_embd']} not divisible by heads {heads}")
    vv = a.valid_vocab
    if vv is None:
        vv = int(meta.get("vocab_size", info["vocab_padded"]))
    if not 0 < vv <= info["vocab_padded"]:
        sys.exit(f"error: --valid-vocab {vv} not in (0, {info['vocab_padded']}]")
    if a.seq > info["n_ctx"]:
        sys.exit(f"error: --seq {a.seq} > n_ctx {info['n_ctx']}")
    toks = read_tokens(a.data)
    if toks.size and int(toks.max()) >= vv:
        sys.exit(f"error: token {int(toks.max())} >= valid vocab {vv}")
    return Loaded(params, heads, vv, toks,
                  lambda path, tensors, metadata: save_gpt2(
                      path, tensors, metadata=metadata, prefix=info["prefix"]),
                  {"n_head": heads}, meta)


GPT2 = Family(
    load=_load, to_jax=gpt2_jax.to_jax, eval_loss=gpt2_jax.eval_loss,
    grads=gpt2_jax.grads,
    train=lambda params, batches, steps, heads, vv, keep, **adamw:
    gpt2_jax.adamw_train(params, batches, steps, heads=heads, valid_vocab=vv,
                         return_params=keep, **adamw))


def cmd_generate(a):
    import json

    import jax
    import sampling
    params, info = load_gpt2(a.model, with_info=True)
    jp = gpt2_jax.to_jax(params)
    with open(a.prompts, "rb") as f:
        prompts = [list(line) for line in f.read().splitlines()]
    # One compiled forward over the whole context: causal attention makes
    # the logits of position n independent of the padding after it.
    ctx = info["n_ctx"]
    forward = jax.jit(gpt2_jax.forward, static_argnums=2)
    generated = []
    for b, prompt in enumerate(prompts):
        ids, new = list(prompt), []
        for step in range(a.max_new):
            if len(ids) > ctx:
                sys.exit(f"error: prompt {b} needs {len(ids)} positions, "
                         f"n_ctx is {ctx}")
            padded = np.zeros((1, ctx), np.int32)
            padded[0, :len(ids)] = ids
            logits = np.asarray(forward(jp, padded, a.heads))[
                0, len(ids) - 1, :a.valid_vocab]
            token = sampling.choose(logits, a.temperature, a.top_k, a.top_p,
                                    a.seed, b, step)
            ids.append(token)
            new.append(token)
        generated.append(new)
    print(json.dumps({"generated": generated}))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_training_commands(sub, _common, GPT2)
    p = sub.add_parser("generate", help="continue prompts, full recompute")
    p.add_argument("--model", required=True)
    p.add_argument("--prompts", required=True, help="one text prompt a line")
    p.add_argument("--max-new", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--valid-vocab", type=int, required=True)
    add_sampling_options(p)
    p.set_defaults(fn=cmd_generate)
    a = ap.parse_args(argv)
    a.fn(a)


if __name__ == "__main__":
    main()
