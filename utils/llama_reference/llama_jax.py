"""Pure-JAX Llama reference (float32) with Hugging Face LlamaForCausalLM
semantics, written from the architecture (no library model class).

params: {HF name: array} as returned by llama_io.load_llama, nn.Linear layout
(y = x @ W.T, no biases), e.g. "model.layers.0.self_attn.q_proj.weight"
[H*D, C]. cfg: LlamaConfig (heads, kv_heads, rope_theta, norm_eps).

The optimizer pieces (clip_grad_norm_, torch AdamW update, which tensors get
weight decay) are gpt2_reference's gpt2_jax functions, reused unchanged.
"""
import math
import os
import sys
from dataclasses import dataclass

_HERE = os.path.dirname(os.path.abspath(__file__))
_GPT2 = os.path.normpath(os.path.join(_HERE, "..", "gpt2_reference"))
if _GPT2 not in sys.path:
    sys.path.append(_GPT2)

# Importing gpt2_jax also sets jax_enable_x64=False and matmul precision
# "highest" (full fp32 matmuls), the settings this reference wants too.
import gpt2_jax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


RMS_EPS = 1e-5
ROPE_THETA = 10000.0


@dataclass(frozen=True)
class LlamaConfig:
    heads: int
    kv_heads: int
    rope_theta: float = ROPE_THETA
    norm_eps: float = RMS_EPS


def n_layers(params):
    return sum(1 for n in params if n.endswith(".input_layernorm.weight"))


def check_config(params, cfg):
    """Raise ValueError unless params fit cfg; returns head_dim D."""
    H, KV = cfg.heads, cfg.kv_heads
    qd = params["model.layers.0.self_attn.q_proj.weight"].shape[0]
    kd = params["model.layers.0.self_attn.k_proj.weight"].shape[0]
    if H <= 0 or KV <= 0 or H % KV:
        raise ValueError(f"heads {H} must be a positive multiple of kv_heads {KV}")
    if qd % H:
        raise ValueError(f"q_proj rows {qd} not divisible by heads {H}")
    D = qd // H
    if D % 2:
        raise ValueError(f"head_dim {D} must be even for rotary embeddings")
    if kd != KV * D:
        raise ValueError(f"k_proj rows {kd} != kv_heads {KV} * head_dim {D}")
    return D


# --------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------
def rms_norm(x, w, eps=RMS_EPS):
    """x * rsqrt(mean(x^2 over the last dim) + eps) * w."""
    ms = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
    return x * jax.lax.rsqrt(ms + eps) * w


def rope_cos_sin(positions, head_dim, theta=ROPE_THETA):
    """cos, sin [len(positions), head_dim] as float64 numpy arrays.

    inv_freq[j] = 1 / theta^(2j/D), j < D/2; angle[t, j] = pos[t] * inv_freq[j]
    (all float64); emb = concat(angle, angle) over the last dim (HF layout).
    """
    pos = np.asarray(positions, dtype=np.float64)
    inv_freq = 1.0 / (float(theta) ** (np.arange(0, head_dim, 2, dtype=np.float64)
                                       / head_dim))
    ang = pos[:, None] * inv_freq[None, :]
    emb = np.concatenate([ang, ang], axis=-1)
    return np.cos(emb), np.sin(emb)


def rotate_half(x):
    d = x.shape[-1] // 2
    return jnp.concatenate([-x[..., d:], x[..., :d]], axis=-1)


def apply_rope(x, cos, sin):
    """x [B,T,N,D]; cos/sin [T,D] (cast to x's dtype: float32 normally)."""
    cos = jnp.asarray(cos, x.dtype)[None, :, None, :]
    sin = jnp.asarray(sin, x.dtype)[None, :, None, :]
    return x * cos + rotate_half(x) * sin


def gqa_attention(q, k, v):
    """q [B,T,H,D], k/v [B,T,KV,D] -> [B,T,H*D]. Causal, scale 1/sqrt(D);
    query head h reads kv head h // (H/KV)."""
    B, T, H, D = q.shape
    KV = k.shape[2]
    G = H // KV
    qg = q.reshape(B, T, KV, G, D)  # head h = kv*G + g
    s = jnp.einsum("btkgd,bskd->bkgts", qg, k) * (1.0 / math.sqrt(D))
    mask = jnp.tril(jnp.ones((T, T), dtype=bool))
    s = jnp.where(mask, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    y = jnp.einsum("bkgts,bskd->btkgd", p, v)
    return y.reshape(B, T, H * D)


def forward(params, ids, cfg):
    """ids [B,T] int -> logits [B,T,Vp] (all lm_head rows). Positions 0..T-1."""
    L = n_layers(params)
    B, T = ids.shape
    H, KV = cfg.heads, cfg.kv_heads
    D = params["model.layers.0.self_attn.q_proj.weight"].shape[0] // H
    cos, sin = rope_cos_sin(np.arange(T), D, cfg.rope_theta)
    x = params["model.embed_tokens.weight"][ids]
    for i in range(L):
        p = f"model.layers.{i}."
        h = rms_norm(x, params[p + "input_layernorm.weight"], cfg.norm_eps)
        q = (h @ params[p + "self_attn.q_proj.weight"].T).reshape(B, T, H, D)
        k = (h @ params[p + "self_attn.k_proj.weight"].T).reshape(B, T, KV, D)
        v = (h @ params[p + "self_attn.v_proj.weight"].T).reshape(B, T, KV, D)
        a = gqa_attention(apply_rope(q, cos, sin), apply_rope(k, cos, sin), v)
        x = x + a @ params[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, params[p + "post_attention_layernorm.weight"], cfg.norm_eps)
        g = jax.nn.silu(h @ params[p + "mlp.gate_proj.weight"].T)
        u = h @ params[p + "mlp.up_proj.weight"].T
        x = x + (g * u) @ params[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, params["model.norm.weight"], cfg.norm_eps)
    return x @ params["lm_head.weight"].T


def loss_and_logits(params, ids, targets, cfg, valid_vocab=None):
    """Mean cross-entropy over all B*T tokens using the first valid_vocab
    logits (None: all). Returns (loss, logits [B,T,Vp])."""
    logits = forward(params, ids, cfg)
    lv = logits if valid_vocab is None else logits[..., :valid_vocab]
    lse = jax.nn.logsumexp(lv, axis=-1)
    tgt = jnp.take_along_axis(lv, targets[..., None], axis=-1)[..., 0]
    return jnp.mean(lse - tgt), logits


def loss_fn(params, ids, targets, cfg, valid_vocab=None):
    return loss_and_logits(params, ids, targets, cfg, valid_vocab)[0]


_loss_and_logits_jit = jax.jit(loss_and_logits, static_argnums=(3, 4))
_value_and_grad_jit = jax.jit(jax.value_and_grad(loss_fn), static_argnums=(3, 4))
forward_jit = jax.jit(forward, static_argnums=2)


def to_jax(params, dtype=jnp.float32):
    return {n: jnp.asarray(v, dtype=dtype) for n, v in params.items()}


def eval_loss(params, ids, targets, cfg, valid_vocab=None):
    """Jitted (loss, logits)."""
    return _loss_and_logits_jit(params, jnp.asarray(ids, jnp.int32),
                                jnp.asarray(targets, jnp.int32), cfg, valid_vocab)


def grads(params, ids, targets, cfg, valid_vocab=None):
    """(loss, {name: dloss/dparam}) by jax.grad (jitted)."""
    return _value_and_grad_jit(params, jnp.asarray(ids, jnp.int32),
                               jnp.asarray(targets, jnp.int32), cfg, valid_vocab)


# --------------------------------------------------------------------------
# torch.optim.AdamW + clip_grad_norm_ (gpt2_jax's update, same decay rule)
# --------------------------------------------------------------------------
def adamw_train(params, batches, steps, lr, cfg, beta1=0.9, beta2=0.999,
                eps=1e-8, weight_decay=0.0, grad_clip=None, valid_vocab=None,
                return_params=False):
    """Train `steps` steps with torch.optim.AdamW semantics (as
    gpt2_jax.adamw_train): decoupled weight decay on 2-D weights only,
    clip_grad_norm_(grad_clip). batches: callable step -> (ids, targets) or a
    sequence. Returns (losses, grad_norms) -- before each step's update,
    grad_norm pre-clipping -- plus the final params when return_params."""
    step_fn = gpt2_jax.make_adamw_step(
        lambda p, ids, tg: loss_fn(p, ids, tg, cfg, valid_vocab),
        float(beta1), float(beta2), float(eps), float(weight_decay), grad_clip)
    return gpt2_jax.run_adamw(step_fn, to_jax(params), batches, steps, lr,
                              beta1, beta2, weight_decay, return_params)

