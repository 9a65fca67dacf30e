#!/usr/bin/env python3
"""Reference Llama numbers for the compiled training step (JAX, fp32).

  reference.py eval  --model M --data D --batch B --seq T [--heads H \
                     --kv-heads KV --valid-vocab V] --steps S \
                     [--dump-logits F.npy]
      -> "step S loss X" per step (fixed params, batch s for step s)
  reference.py grads --model M --data D --batch B --seq T ... \
                     --out grads.safetensors [--step 0]
      -> "step S loss X"; writes d(loss of that step)/d(param) per parameter
         under the checkpoint's Hugging Face names
  reference.py train --model M --data D --batch B --seq T ... --steps 10 \
                     --lr 1e-4 [--beta1 0.9 --beta2 0.999 --eps 1e-8 \
                     --weight-decay 0 --grad-clip 1 --out final.safetensors]
      -> "step S loss X grad_norm G" per step (torch.optim.AdamW semantics;
         weight decay on 2-D weights only, as gpt2_reference)
  reference.py generate --model M (--prompts P.txt | --prompt-tokens 1,2,3) \
                     --max-new N [--heads H --kv-heads KV --valid-vocab V \
                     --temperature 0 --top-k 0 --top-p 1 --seed S]
      -> {"generated": [[ids...], ...]}: each prompt (a line of P.txt as byte
         tokens) continued by N tokens, each from a full forward pass over
         the sequence so far (no KV cache; rotary positions are the absolute
         positions 0..n-1); greedy at temperature 0, else megatron-run's
         Gumbel-max sampling (gpt2_reference/sampling.py) on the same logits

Numbers are printed with repr() of the float32 value (exact). --heads,
--kv-heads, --rope-theta, --norm-eps and --valid-vocab default to the
checkpoint metadata (n_head, n_kv_head, rope_theta, norm_eps, vocab_size);
without metadata --kv-heads is inferred from the k_proj/q_proj shapes,
--rope-theta is 10000, --norm-eps 1e-5, --valid-vocab the number of
embed_tokens rows.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import llama_jax  # noqa: E402  (adds ../gpt2_reference to sys.path)
from llama_io import load_llama, save_llama  # noqa: E402
from reference_cli import (Family, Loaded, add_sampling_options,  # noqa: E402
                           add_training_commands)
from tokens_io import read_tokens  # noqa: E402


def _model_args(p):
    p.add_argument("--model", required=True, help="model.safetensors")
    p.add_argument("--heads", type=int, default=None)
    p.add_argument("--kv-heads", type=int, default=None)
    p.add_argument("--rope-theta", type=float, default=None)
    p.add_argument("--norm-eps", type=float, default=None)
    p.add_argument("--valid-vocab", type=int, default=None)


def _common(p):
    _model_args(p)
    p.add_argument("--data", required=True, help="llm.c token file")
    p.add_argument("--batch", "-B", type=int, required=True)
    p.add_argument("--seq", "-T", type=int, required=True)
    p.add_argument("--timing", action="store_true",
                   help="print timings to stderr")


def _load_model(a):
    """-> params, info, LlamaConfig, valid_vocab (flags, else metadata)."""
    params, info = load_llama(a.model, with_info=True)
    meta = info["metadata"]
    if info["n_layer"] == 0:
        sys.exit("error: the checkpoint has no layers")
    heads = a.heads if a.heads is not None else int(meta.get("n_head", 0)) or None
    if heads is None:
        sys.exit("error: --heads is required (no n_head in checkpoint metadata)")
    kv = a.kv_heads if a.kv_heads is not None else int(meta.get("n_kv_head", 0)) or None
    if kv is None:
        if info["q_dim"] % heads:
            sys.exit(f"error: q_proj rows {info['q_dim']} not divisible by "
                     f"heads {heads}")
        kv = info["kv_dim"] // (info["q_dim"] // heads)
    theta = (a.rope_theta if a.rope_theta is not None
             else float(meta.get("rope_theta", llama_jax.ROPE_THETA)))
    eps = (a.norm_eps if a.norm_eps is not None
           else float(meta.get("norm_eps", llama_jax.RMS_EPS)))
    cfg = llama_jax.LlamaConfig(heads=heads, kv_heads=kv, rope_theta=theta,
                                norm_eps=eps)
    try:
        llama_jax.check_config(params, cfg)
    except ValueError as e:
        sys.exit(f"error: {e}")
    vv = a.valid_vocab
    if vv is None:
        vv = int(meta.get("vocab_size", info["vocab_padded"]))
    if not 0 < vv <= info["vocab_padded"]:
        sys.exit(f"error: --valid-vocab {vv} not in (0, {info['vocab_padded']}]")
    return params, info, cfg, vv


def _load(a):
    params, info, cfg, vv = _load_model(a)
    toks = read_tokens(a.data)
    if toks.size and int(toks.max()) >= vv:
        sys.exit(f"error: token {int(toks.max())} >= valid vocab {vv}")
    return Loaded(params, cfg, vv, toks,
                  lambda path, tensors, metadata: save_llama(
                      path, tensors, metadata=metadata),
                  {"n_head": cfg.heads, "n_kv_head": cfg.kv_heads,
                   "rope_theta": repr(cfg.rope_theta),
                   "norm_eps": repr(cfg.norm_eps)},
                  info["metadata"])


LLAMA = Family(
    load=_load, to_jax=llama_jax.to_jax, eval_loss=llama_jax.eval_loss,
    grads=llama_jax.grads,
    train=lambda params, batches, steps, cfg, vv, keep, **adamw:
    llama_jax.adamw_train(params, batches, steps, cfg=cfg, valid_vocab=vv,
                          return_params=keep, **adamw))


def cmd_generate(a):
    import sampling  # gpt2_reference/sampling.py (megatron-run's rule)
    params, info, cfg, vv = _load_model(a)
    jp = llama_jax.to_jax(params)
    if (a.prompts is None) == (a.prompt_tokens is None):
        sys.exit("error: give exactly one of --prompts and --prompt-tokens")
    if a.prompts is not None:
        with open(a.prompts, "rb") as f:
            prompts = [list(line) for line in f.read().splitlines()]
    else:
        prompts = [[int(t) for t in a.prompt_tokens.split(",")]]
    for b, p in enumerate(prompts):
        if not p:
            sys.exit(f"error: prompt {b} has no tokens")
        if max(p) >= vv or min(p) < 0:
            sys.exit(f"error: prompt {b} has a token outside [0, {vv})")
    # One compiled forward over a fixed length: causal attention makes the
    # logits of position n independent of the padding after it, and rotary
    # positions are absolute (0..len-1) either way.
    ctx = a.ctx if a.ctx else max(len(p) for p in prompts) + max(a.max_new, 1)
    generated = []
    for b, prompt in enumerate(prompts):
        ids, new = list(prompt), []
        for step in range(a.max_new):
            if len(ids) > ctx:
                sys.exit(f"error: prompt {b} needs {len(ids)} positions, "
                         f"--ctx is {ctx}")
            padded = np.zeros((1, ctx), np.int32)
            padded[0, :len(ids)] = ids
            logits = np.asarray(llama_jax.forward_jit(jp, padded, cfg))[
                0, len(ids) - 1, :vv]
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
    add_training_commands(sub, _common, LLAMA)
    p = sub.add_parser("generate", help="continue prompts, full recompute")
    _model_args(p)
    p.add_argument("--prompts", default=None, help="one text prompt a line "
                   "(its bytes are the tokens)")
    p.add_argument("--prompt-tokens", default=None,
                   help="one prompt as token ids: 1,2,3")
    p.add_argument("--max-new", type=int, required=True)
    p.add_argument("--ctx", type=int, default=0,
                   help="positions of the padded forward (and the limit on "
                        "prompt + new tokens); default: just enough")
    add_sampling_options(p)
    p.set_defaults(fn=cmd_generate)
    a = ap.parse_args(argv)
    a.fn(a)


if __name__ == "__main__":
    main()
