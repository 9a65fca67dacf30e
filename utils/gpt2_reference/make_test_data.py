#!/usr/bin/env python3
"""Make a random GPT-2 checkpoint (model.safetensors) and a random llm.c
token file (tokens.bin) for tests and benchmarks. Nothing is downloaded.

  python make_test_data.py --out-dir DIR --layers 2 --heads 4 --embd 64 \
      --vocab 512 --padded-vocab 512 --ctx 64 --tokens 4096 --seed 0
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import gpt2_param_shapes, save_gpt2  # noqa: E402
from tokens_io import write_tokens  # noqa: E402


def gpt2_init(layers, embd, padded_vocab, ctx, seed=0, perturb=0.0):
    """GPT-2 initialisation (numpy float32, canonical HF names).

    Weights ~ N(0, 0.02); attn.c_proj / mlp.c_proj weights ~ N(0, 0.02/sqrt(2L));
    biases 0; layer-norm weight 1, bias 0. With perturb > 0, every bias and
    layer-norm parameter additionally gets N(0, perturb) noise so that tests
    exercise them. Padded vocabulary rows of wte are initialised like the
    real rows (they must never influence the loss).
    """
    rng = np.random.default_rng(seed)
    proj_std = 0.02 / np.sqrt(2 * layers)
    params = {}
    for name, shape in gpt2_param_shapes(layers, embd, padded_vocab, ctx).items():
        if name.endswith(".weight") and len(shape) == 2:
            std = proj_std if name.endswith("c_proj.weight") else 0.02
            v = rng.normal(0.0, std, size=shape)
        elif ("ln_" in name) and name.endswith(".weight"):
            v = np.ones(shape)
            if perturb:
                v = v + rng.normal(0.0, perturb, size=shape)
        else:  # biases (linear and layer norm)
            v = np.zeros(shape)
            if perturb:
                v = v + rng.normal(0.0, perturb, size=shape)
        params[name] = v.astype(np.float32)
    return params


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--padded-vocab", type=int, default=None,
                    help="rows of wte (>= --vocab); default = --vocab")
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--perturb", type=float, default=0.02,
                    help="std of the noise added to biases and layer-norm "
                         "params (0 = pure GPT-2 init)")
    a = ap.parse_args(argv)
    vp = a.padded_vocab if a.padded_vocab is not None else a.vocab
    if vp < a.vocab:
        ap.error("--padded-vocab must be >= --vocab")
    if a.embd % a.heads:
        ap.error("--embd must be divisible by --heads")
    if a.vocab > 65536:
        ap.error("--vocab must fit in uint16 tokens")
    os.makedirs(a.out_dir, exist_ok=True)
    params = gpt2_init(a.layers, a.embd, vp, a.ctx, a.seed, a.perturb)
    meta = {"format": "pt", "n_layer": a.layers, "n_head": a.heads,
            "n_embd": a.embd, "vocab_size": a.vocab, "padded_vocab_size": vp,
            "n_ctx": a.ctx, "seed": a.seed, "perturb": a.perturb}
    save_gpt2(os.path.join(a.out_dir, "model.safetensors"), params, meta)
    rng = np.random.default_rng(a.seed + 1)
    write_tokens(os.path.join(a.out_dir, "tokens.bin"),
                 rng.integers(0, a.vocab, size=a.tokens))
    print(f"wrote {a.out_dir}/model.safetensors "
          f"({sum(v.size for v in params.values())} params) and "
          f"{a.out_dir}/tokens.bin ({a.tokens} tokens)")


if __name__ == "__main__":
    main()
