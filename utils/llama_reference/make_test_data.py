#!/usr/bin/env python3
"""Make a random Llama checkpoint (model.safetensors, Hugging Face
LlamaForCausalLM names) and a random llm.c token file (tokens.bin) for tests
and benchmarks. Nothing is downloaded.

  python make_test_data.py --out-dir DIR --layers 2 --heads 4 --kv-heads 2 \
      --embd 64 --ffn 172 --vocab 512 --tokens 4096 --seed 0
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_io import llama_init, save_llama  # noqa: E402  (adds ../gpt2_reference)
from tokens_io import write_tokens  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=None,
                    help="key/value heads (divides --heads); default = --heads")
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--ffn", type=int, default=None,
                    help="MLP intermediate size; default = 4 * --embd")
    ap.add_argument("--head-dim", type=int, default=None,
                    help="default = --embd / --heads")
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--padded-vocab", type=int, default=None,
                    help="rows of embed_tokens / lm_head (>= --vocab); "
                         "default = --vocab")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--norm-eps", type=float, default=1e-5)
    ap.add_argument("--perturb", type=float, default=0.02,
                    help="std of the noise added to the RMSNorm gains "
                         "(0 = pure init, gains exactly 1)")
    a = ap.parse_args(argv)
    kv = a.kv_heads if a.kv_heads is not None else a.heads
    ffn = a.ffn if a.ffn is not None else 4 * a.embd
    vp = a.padded_vocab if a.padded_vocab is not None else a.vocab
    if vp < a.vocab:
        ap.error("--padded-vocab must be >= --vocab")
    if kv <= 0 or a.heads % kv:
        ap.error("--kv-heads must divide --heads")
    if a.head_dim is None and a.embd % a.heads:
        ap.error("--embd must be divisible by --heads (or give --head-dim)")
    hd = a.head_dim if a.head_dim is not None else a.embd // a.heads
    if hd % 2:
        ap.error("head dim must be even (rotary embeddings)")
    os.makedirs(a.out_dir, exist_ok=True)
    params = llama_init(a.layers, a.heads, kv, a.embd, ffn, vp, hd, a.seed,
                        a.perturb)
    meta = {"format": "pt", "model": "llama", "n_layer": a.layers,
            "n_head": a.heads, "n_kv_head": kv, "head_dim": hd,
            "n_embd": a.embd, "intermediate_size": ffn, "vocab_size": a.vocab,
            "padded_vocab_size": vp, "rope_theta": repr(a.rope_theta),
            "norm_eps": repr(a.norm_eps), "seed": a.seed, "perturb": a.perturb}
    save_llama(os.path.join(a.out_dir, "model.safetensors"), params, meta)
    rng = np.random.default_rng(a.seed + 1)
    # llm.c's 32-bit layout where the vocabulary needs it (Llama 3's).
    write_tokens(os.path.join(a.out_dir, "tokens.bin"),
                 rng.integers(0, a.vocab, size=a.tokens),
                 wide=a.vocab > 0x10000)
    print(f"wrote {a.out_dir}/model.safetensors "
          f"({sum(v.size for v in params.values())} params) and "
          f"{a.out_dir}/tokens.bin ({a.tokens} tokens)")


if __name__ == "__main__":
    main()
