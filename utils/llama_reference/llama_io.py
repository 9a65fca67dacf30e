"""Llama checkpoints with Hugging Face LlamaForCausalLM names, on top of the
generic pieces of ../gpt2_reference (safetensors_io.read/write_safetensors).

Names and shapes (nn.Linear layout [out, in]; no biases; lm_head untied):
  model.embed_tokens.weight                        [Vp, C]
  model.layers.{i}.input_layernorm.weight          [C]
  model.layers.{i}.self_attn.{q,k,v,o}_proj.weight [H*D, C], [KV*D, C] x2, [C, H*D]
  model.layers.{i}.post_attention_layernorm.weight [C]
  model.layers.{i}.mlp.{gate,up}_proj.weight       [F, C]
  model.layers.{i}.mlp.down_proj.weight            [C, F]
  model.norm.weight                                [C]
  lm_head.weight                                   [Vp, C]
"""
import os
import re
import sys

_GPT2 = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      "..", "gpt2_reference"))
if _GPT2 not in sys.path:
    sys.path.append(_GPT2)

import numpy as np  # noqa: E402

from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

_LAYER_RE = re.compile(r"^model\.layers\.(\d+)\.")
# Non-parameter buffers some Llama checkpoints carry (older transformers).
_BUFFER_RE = re.compile(r"^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$")

LAYER_NAMES = ("input_layernorm.weight", "self_attn.q_proj.weight",
               "self_attn.k_proj.weight", "self_attn.v_proj.weight",
               "self_attn.o_proj.weight", "post_attention_layernorm.weight",
               "mlp.gate_proj.weight", "mlp.up_proj.weight",
               "mlp.down_proj.weight")


def llama_param_shapes(n_layer, n_embd, vocab_padded, q_dim, kv_dim, ffn):
    """{name: shape} in canonical order. q_dim = H*D, kv_dim = KV*D."""
    C = n_embd
    shapes = {"model.embed_tokens.weight": (vocab_padded, C)}
    for i in range(n_layer):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (C,),
            p + "self_attn.q_proj.weight": (q_dim, C),
            p + "self_attn.k_proj.weight": (kv_dim, C),
            p + "self_attn.v_proj.weight": (kv_dim, C),
            p + "self_attn.o_proj.weight": (C, q_dim),
            p + "post_attention_layernorm.weight": (C,),
            p + "mlp.gate_proj.weight": (ffn, C),
            p + "mlp.up_proj.weight": (ffn, C),
            p + "mlp.down_proj.weight": (C, ffn)})
    shapes["model.norm.weight"] = (C,)
    shapes["lm_head.weight"] = (vocab_padded, C)
    return shapes


def llama_config_from_params(params):
    """Infer n_layer, n_embd, vocab_padded, q_dim, kv_dim, ffn from shapes."""
    layers = {int(m.group(1)) for n in params if (m := _LAYER_RE.match(n))}
    n_layer = max(layers) + 1 if layers else 0
    vp, C = params["model.embed_tokens.weight"].shape
    cfg = {"n_layer": n_layer, "n_embd": int(C), "vocab_padded": int(vp),
           "q_dim": 0, "kv_dim": 0, "ffn": 0}
    if n_layer:
        p = "model.layers.0."
        for key, name in (("q_dim", "self_attn.q_proj.weight"),
                          ("kv_dim", "self_attn.k_proj.weight"),
                          ("ffn", "mlp.gate_proj.weight")):
            if p + name in params:
                cfg[key] = int(params[p + name].shape[0])
    return cfg


def load_llama(path, with_info=False):
    """Read a Llama checkpoint into {HF name: float32 array}, canonical order.

    Drops `rotary_emb.inv_freq` buffers; checks the set of names and every
    shape; refuses a checkpoint without lm_head.weight (tied embeddings are
    not this model). With with_info, also returns
    {"metadata": dict, **llama_config_from_params}.
    """
    raw, metadata = read_safetensors(path, with_metadata=True)
    params = {n: a for n, a in raw.items() if not _BUFFER_RE.match(n)}
    if "model.embed_tokens.weight" not in params:
        raise ValueError(f"{path}: model.embed_tokens.weight missing")
    if "lm_head.weight" not in params:
        raise ValueError(f"{path}: lm_head.weight missing (tied embeddings "
                         "are not supported: the reference has an untied head)")
    cfg = llama_config_from_params(params)
    expected = llama_param_shapes(**cfg)
    missing = sorted(set(expected) - set(params))
    extra = sorted(set(params) - set(expected))
    if missing or extra:
        raise ValueError(f"{path}: missing {missing}, unexpected {extra}")
    for n, s in expected.items():
        if tuple(params[n].shape) != s:
            raise ValueError(f"{path}: {n} has shape {params[n].shape}, expected {s}")
    params = {n: params[n] for n in expected}
    if with_info:
        return params, {"metadata": metadata, **cfg}
    return params


def save_llama(path, params, metadata=None):
    write_safetensors(path, {n: np.asarray(v, dtype=np.float32)
                             for n, v in params.items()}, metadata)


def llama_init(layers, heads, kv_heads, embd, ffn, vocab_padded, head_dim=None,
               seed=0, perturb=0.0):
    """Random Llama parameters (numpy float32, canonical HF names).

    Every 2-D weight ~ N(0, 0.02) (HF's initializer_range); RMSNorm gains 1,
    plus N(0, perturb) noise when perturb > 0 so that tests exercise them.
    Padded vocabulary rows are initialised like the real ones.
    """
    D = head_dim if head_dim is not None else embd // heads
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in llama_param_shapes(layers, embd, vocab_padded, heads * D,
                                          kv_heads * D, ffn).items():
        if len(shape) == 2:
            v = rng.normal(0.0, 0.02, size=shape)
        else:
            v = np.ones(shape)
            if perturb:
                v = v + rng.normal(0.0, perturb, size=shape)
        params[name] = v.astype(np.float32)
    return params
