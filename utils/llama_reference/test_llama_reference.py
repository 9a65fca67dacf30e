"""Self-tests of the Llama reference: python -m pytest utils/llama_reference

(Named test_llama_reference.py, not test_reference.py, so that one pytest run
can collect it together with utils/gpt2_reference/test_reference.py.)"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import llama_jax  # noqa: E402  (adds ../gpt2_reference to sys.path)
from llama_io import llama_init, load_llama, save_llama  # noqa: E402
from llama_jax import LlamaConfig  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402
from tokens_io import batch, read_tokens  # noqa: E402

import gpt2_jax  # noqa: E402  (plain multi-head attention, for comparison)

L, H, KV, C, F, V, VP, B, T = 2, 4, 2, 32, 48, 96, 128, 2, 8
CFG = LlamaConfig(heads=H, kv_heads=KV, rope_theta=10000.0, norm_eps=1e-5)


@pytest.fixture(scope="module")
def model():
    # 2-D weights scaled x5 (std 0.1) so that attention, rotary positions and
    # the kv-head mapping measurably change the loss; RMSNorm gains perturbed.
    p = llama_init(L, H, KV, C, F, VP, seed=1, perturb=0.1)
    return {k: (v * 5 if v.ndim == 2 else v) for k, v in p.items()}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    toks = rng.integers(0, V, size=200).astype(np.uint16)
    return batch(toks, 0, B, T)


# ------------------------------------------- numpy float64, written apart
def np_rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def np_rope_complex(x, positions, theta):
    """RoPE in the HF (rotate_half) convention as a complex rotation: the
    pairs are (x[j], x[j + D/2]) = re + i*im, rotated by pos * theta^(-2j/D).
    x [..., T, D] with positions [T]."""
    D = x.shape[-1]
    j = np.arange(D // 2)
    ang = np.asarray(positions, np.float64)[:, None] * theta ** (-2.0 * j / D)
    z = (x[..., :D // 2] + 1j * x[..., D // 2:]) * np.exp(1j * ang)
    return np.concatenate([z.real, z.imag], axis=-1)


def np_forward(p, ids, heads, kv_heads, theta=10000.0, eps=1e-5,
               kv_of=lambda h, g: h // g):
    """Logits [B,T,Vp] in float64; attention per (batch, head) with an
    explicit kv head kv_of(h, H/KV) and rotary by complex numbers."""
    p = {k: np.asarray(v, np.float64) for k, v in p.items()}
    Bn, Tn = ids.shape
    D = p["model.layers.0.self_attn.q_proj.weight"].shape[0] // heads
    G = heads // kv_heads
    nl = sum(1 for k in p if k.endswith("input_layernorm.weight"))
    pos = np.arange(Tn)
    causal = np.tril(np.ones((Tn, Tn), bool))
    x = p["model.embed_tokens.weight"][ids]
    for i in range(nl):
        q = f"model.layers.{i}."
        h = np_rms(x, p[q + "input_layernorm.weight"], eps)
        qs = h @ p[q + "self_attn.q_proj.weight"].T
        ks = h @ p[q + "self_attn.k_proj.weight"].T
        vs = h @ p[q + "self_attn.v_proj.weight"].T
        out = np.zeros(qs.shape)
        for b in range(Bn):
            for hd in range(heads):
                kh = kv_of(hd, G)
                qh = np_rope_complex(qs[b, :, hd * D:(hd + 1) * D], pos, theta)
                kk = np_rope_complex(ks[b, :, kh * D:(kh + 1) * D], pos, theta)
                vv = vs[b, :, kh * D:(kh + 1) * D]
                s = np.where(causal, qh @ kk.T / np.sqrt(D), -np.inf)
                w = np.exp(s - s.max(-1, keepdims=True))
                w /= w.sum(-1, keepdims=True)
                out[b, :, hd * D:(hd + 1) * D] = w @ vv
        x = x + out @ p[q + "self_attn.o_proj.weight"].T
        h = np_rms(x, p[q + "post_attention_layernorm.weight"], eps)
        gt = h @ p[q + "mlp.gate_proj.weight"].T
        up = h @ p[q + "mlp.up_proj.weight"].T
        x = x + (gt / (1 + np.exp(-gt)) * up) @ p[q + "mlp.down_proj.weight"].T
    x = np_rms(x, p["model.norm.weight"], eps)
    return x @ p["lm_head.weight"].T


def np_loss(p, ids, tg, heads, kv_heads, valid_vocab, **kw):
    logits = np_forward(p, ids, heads, kv_heads, **kw)[..., :valid_vocab]
    m = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(-1)) + m[..., 0]
    tgt = np.take_along_axis(logits, tg[..., None], -1)[..., 0]
    return float(np.mean(lse - tgt))


# ------------------------------------------------------------ building blocks
def test_rmsnorm_hand_computed():
    # mean(x^2) = (1 + 9 + 25 + 49) / 4 = 21; + eps 4 = 25; rsqrt = 0.2
    x = jnp.array([[1.0, 3.0, -5.0, 7.0]], jnp.float32)
    w = jnp.array([1.0, 0.5, 2.0, -1.0], jnp.float32)
    y = np.asarray(llama_jax.rms_norm(x, w, 4.0))
    np.testing.assert_allclose(y, [[0.2, 0.3, -2.0, -1.4]], rtol=1e-6)
    # default eps 1e-5: [3, 4] has mean square 12.5; rows are independent
    x = jnp.array([[[3.0, 4.0], [0.0, 0.0]]], jnp.float32)
    y = np.asarray(llama_jax.rms_norm(x, jnp.ones(2, jnp.float32)))
    r = 1.0 / math.sqrt(12.5 + 1e-5)
    np.testing.assert_allclose(y[0, 0], [3 * r, 4 * r], rtol=1e-6)
    np.testing.assert_array_equal(y[0, 1], [0.0, 0.0])
    assert llama_jax.RMS_EPS == 1e-5 and llama_jax.ROPE_THETA == 10000.0


@pytest.mark.parametrize("theta,offset", [(10000.0, 0), (10000.0, 1000),
                                          (500000.0, 37)])
def test_rope_matches_complex_rotation(theta, offset):
    rng = np.random.default_rng(2)
    Dh, Tn = 16, 12
    x = rng.normal(size=(2, Tn, 3, Dh)).astype(np.float32)  # [B,T,N,D]
    pos = offset + np.arange(Tn)
    cos, sin = llama_jax.rope_cos_sin(pos, Dh, theta)
    assert cos.dtype == np.float64 and cos.shape == (Tn, Dh)
    # tables: float64 angles pos * theta^(-2j/D), duplicated over the halves
    j = np.arange(Dh // 2)
    ang = pos[:, None].astype(np.float64) / (theta ** (2.0 * j / Dh))
    np.testing.assert_allclose(cos[:, :Dh // 2], np.cos(ang), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(cos[:, Dh // 2:], cos[:, :Dh // 2])
    np.testing.assert_array_equal(sin[:, Dh // 2:], sin[:, :Dh // 2])
    y = np.asarray(llama_jax.apply_rope(jnp.asarray(x), cos, sin))
    ref = np_rope_complex(x.astype(np.float64).transpose(0, 2, 1, 3), pos,
                          theta).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    # a rotation: norms kept; position 0 is the identity
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1),
                               np.linalg.norm(x, axis=-1), rtol=1e-5)
    if offset == 0:
        np.testing.assert_array_equal(y[:, 0], x[:, 0])


def test_rope_scores_depend_on_relative_position():
    rng = np.random.default_rng(4)
    Dh = 8
    q = rng.normal(size=(1, 1, 1, Dh)).astype(np.float32)
    k = rng.normal(size=(1, 1, 1, Dh)).astype(np.float32)

    def score(m, n):
        cq, sq = llama_jax.rope_cos_sin([m], Dh)
        ck, sk = llama_jax.rope_cos_sin([n], Dh)
        a = np.asarray(llama_jax.apply_rope(jnp.asarray(q), cq, sq))
        b = np.asarray(llama_jax.apply_rope(jnp.asarray(k), ck, sk))
        return float((a * b).sum())

    assert score(5, 2) == pytest.approx(score(13, 10), rel=1e-5)
    assert abs(score(5, 2) - score(5, 4)) > 1e-3


def _rand_qkv(seed, heads, kv_heads, Dh=8, Bn=2, Tn=6):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(Bn, Tn, heads, Dh)).astype(np.float32)
    k = rng.normal(size=(Bn, Tn, kv_heads, Dh)).astype(np.float32)
    v = rng.normal(size=(Bn, Tn, kv_heads, Dh)).astype(np.float32)
    return q, k, v


def _mha(q, k, v):
    """gpt2_reference's plain multi-head attention on [B,T,H,D] inputs."""
    Bn, Tn, Hn, Dh = q.shape
    qkv = np.concatenate([a.reshape(Bn, Tn, Hn * Dh) for a in (q, k, v)], -1)
    return np.asarray(gpt2_jax.attention(jnp.asarray(qkv), Hn))


def test_gqa_equal_heads_is_plain_mha():
    q, k, v = _rand_qkv(5, 4, 4)
    y = np.asarray(llama_jax.gqa_attention(jnp.asarray(q), jnp.asarray(k),
                                           jnp.asarray(v)))
    np.testing.assert_allclose(y, _mha(q, k, v), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (6, 2), (4, 1)])
def test_gqa_is_mha_with_repeated_kv_heads(heads, kv_heads):
    q, k, v = _rand_qkv(6, heads, kv_heads)
    y = np.asarray(llama_jax.gqa_attention(jnp.asarray(q), jnp.asarray(k),
                                           jnp.asarray(v)))
    g = heads // kv_heads  # query head h reads kv head h // g
    rep = lambda a: a[:, :, [h // g for h in range(heads)]]  # noqa: E731
    np.testing.assert_allclose(y, _mha(q, rep(k), rep(v)), rtol=1e-5, atol=1e-6)
    # causal: outputs at t do not depend on inputs after t
    k2, v2 = k.copy(), v.copy()
    k2[:, 4:] += 1.0
    v2[:, 4:] -= 1.0
    y2 = np.asarray(llama_jax.gqa_attention(jnp.asarray(q), jnp.asarray(k2),
                                            jnp.asarray(v2)))
    np.testing.assert_array_equal(y2[:, :4], y[:, :4])


# ------------------------------------------------------------------- model
def test_loss_matches_numpy(model, data):
    ids, tg = data
    jp = llama_jax.to_jax(model)
    loss, logits = llama_jax.eval_loss(jp, ids, tg, CFG, V)
    assert logits.shape == (B, T, VP)
    ref = np_loss(model, ids, tg, H, KV, V)
    assert abs(float(loss) - ref) <= 1e-5 * abs(ref), (float(loss), ref)
    np.testing.assert_allclose(np.asarray(logits), np_forward(model, ids, H, KV),
                               rtol=1e-4, atol=1e-4)
    # the test is sensitive to the kv-head mapping and to the rotary base
    wrong = np_loss(model, ids, tg, H, KV, V, kv_of=lambda h, g: h % KV)
    assert abs(wrong - ref) > 1e-4
    ref_t = np_loss(model, ids, tg, H, KV, V, theta=100.0, eps=1e-3)
    lt, _ = llama_jax.eval_loss(jp, ids, tg, LlamaConfig(H, KV, 100.0, 1e-3), V)
    assert abs(float(lt) - ref_t) <= 1e-5 * abs(ref_t)
    assert abs(ref_t - ref) > 1e-4


def test_mha_model_equals_gqa_model_with_repeated_kv(model, data):
    """KV=2 model == KV=H model whose k/v_proj rows repeat per query head."""
    ids, tg = data
    Dh = C // H
    mha = dict(model)
    for i in range(L):
        for n in ("k_proj", "v_proj"):
            w = model[f"model.layers.{i}.self_attn.{n}.weight"].reshape(KV, Dh, C)
            mha[f"model.layers.{i}.self_attn.{n}.weight"] = np.repeat(
                w, H // KV, axis=0).reshape(H * Dh, C)
    l1, _ = llama_jax.eval_loss(llama_jax.to_jax(model), ids, tg, CFG, V)
    l2, _ = llama_jax.eval_loss(llama_jax.to_jax(mha), ids, tg,
                                LlamaConfig(H, H), V)
    assert abs(float(l1) - float(l2)) <= 1e-6 * abs(float(l1))


def test_padded_vocab(model, data):
    ids, tg = data
    unpadded = dict(model, **{n: model[n][:V] for n in
                              ("model.embed_tokens.weight", "lm_head.weight")})
    lp, _ = llama_jax.eval_loss(llama_jax.to_jax(model), ids, tg, CFG, V)
    lu, _ = llama_jax.eval_loss(llama_jax.to_jax(unpadded), ids, tg, CFG, V)
    assert abs(float(lp) - float(lu)) <= 1e-6 * abs(float(lu))
    _, g = llama_jax.grads(llama_jax.to_jax(model), ids, tg, CFG, V)
    assert np.all(np.asarray(g["model.embed_tokens.weight"])[V:] == 0)
    assert np.all(np.asarray(g["lm_head.weight"])[V:] == 0)


FD_NAMES = ["model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
            "model.layers.0.self_attn.q_proj.weight",
            "model.layers.1.self_attn.k_proj.weight",
            "model.layers.0.self_attn.v_proj.weight",
            "model.layers.1.self_attn.o_proj.weight",
            "model.layers.1.post_attention_layernorm.weight",
            "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight",
            "model.layers.0.mlp.down_proj.weight", "model.norm.weight",
            "lm_head.weight"]


@pytest.fixture(scope="module")
def grads64(model, data):
    """jax.grad of the loss with float64 params and activations."""
    ids, tg = data
    with jax.enable_x64(True):
        vg = jax.jit(jax.value_and_grad(llama_jax.loss_fn), static_argnums=(3, 4))
        loss, g = vg(llama_jax.to_jax(model, jnp.float64), jnp.asarray(ids),
                     jnp.asarray(tg), CFG, V)
        assert g["lm_head.weight"].dtype == jnp.float64
        return float(loss), {k: np.asarray(x) for k, x in g.items()}


def test_grads_float64_finite_differences(model, data, grads64):
    """float64 jax.grad vs central differences of the float64 numpy loss."""
    ids, tg = data
    loss64, g64 = grads64
    assert loss64 == pytest.approx(np_loss(model, ids, tg, H, KV, V), rel=1e-12)
    p64 = {k: v.astype(np.float64) for k, v in model.items()}
    rng = np.random.default_rng(3)
    h = 1e-6
    for name in FD_NAMES:
        g = g64[name]
        flat = np.argsort(-np.abs(g).ravel())[:2]  # the two largest entries
        flat = np.concatenate([flat, rng.integers(0, g.size, 1)])  # and one more
        scale = np.abs(g).max()
        for fi in flat:
            idx = np.unravel_index(fi, g.shape)
            orig = p64[name][idx]
            p64[name][idx] = orig + h
            lp = np_loss(p64, ids, tg, H, KV, V)
            p64[name][idx] = orig - h
            lm = np_loss(p64, ids, tg, H, KV, V)
            p64[name][idx] = orig
            fd = (lp - lm) / (2 * h)
            assert abs(g[idx] - fd) <= 1e-6 * abs(fd) + 1e-8 * scale, \
                (name, idx, g[idx], fd)


def test_grads_float32_close_to_float64(model, data, grads64):
    ids, tg = data
    _, g32 = llama_jax.grads(llama_jax.to_jax(model), ids, tg, CFG, V)
    for k, g in grads64[1].items():
        np.testing.assert_allclose(np.asarray(g32[k]), g, rtol=1e-3,
                                   atol=1e-4 * np.abs(g).max(), err_msg=k)


def np_adamw(params, grads, m, v, t, lr, b1, b2, eps, wd, clip):
    """Hand-written torch AdamW + clip_grad_norm_ in float64."""
    norm = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2))
                         for g in grads.values()))
    coef = min(clip / (norm + 1e-6), 1.0) if clip > 0 else 1.0
    out = {}
    for k, p in params.items():
        g = grads[k].astype(np.float64) * coef
        p = p.astype(np.float64)
        if p.ndim == 2:
            p = p * (1 - lr * wd)
        m[k] = b1 * m[k] + (1 - b1) * g
        v[k] = b2 * v[k] + (1 - b2) * g * g
        out[k] = p - lr * (m[k] / (1 - b1 ** t)) / (np.sqrt(v[k] / (1 - b2 ** t)) + eps)
    return out, norm


def test_adamw_matches_numpy(model):
    rng = np.random.default_rng(11)
    toks = rng.integers(0, V, size=300)
    batches = [batch(toks, s, B, T) for s in range(2)]
    hp = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)
    clip = 0.5
    losses, norms, newp = llama_jax.adamw_train(
        model, batches, 2, cfg=CFG, grad_clip=clip, valid_vocab=V,
        return_params=True, **hp)
    p = dict(model)
    m = {k: np.zeros(x.shape) for k, x in p.items()}
    v = {k: np.zeros(x.shape) for k, x in p.items()}
    for s in range(2):
        pj = llama_jax.to_jax({k: x.astype(np.float32) for k, x in p.items()})
        loss, g = llama_jax.grads(pj, *batches[s], CFG, V)
        np.testing.assert_allclose(losses[s], float(loss), rtol=1e-5)
        p, norm = np_adamw(p, {k: np.asarray(x) for k, x in g.items()}, m, v,
                           s + 1, hp["lr"], hp["beta1"], hp["beta2"], hp["eps"],
                           hp["weight_decay"], clip)
        np.testing.assert_allclose(norms[s], norm, rtol=1e-5)
    assert norms[0] > clip  # clipping was active
    for k in p:
        assert np.abs(newp[k] - p[k]).max() <= 2e-2 * hp["lr"], k
        assert np.abs(newp[k] - model[k]).max() > 0.5 * hp["lr"], k


def test_weight_decay_only_on_matrices(model):
    dec = sorted(k for k, x in model.items() if gpt2_jax.decays(k, x.shape))
    assert dec == sorted(["model.embed_tokens.weight", "lm_head.weight"] + [
        f"model.layers.{i}.{n}.weight" for i in range(L)
        for n in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                  "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                  "mlp.down_proj")])


# ---------------------------------------------------------------- I/O, CLI
def test_checkpoint_io(tmp_path, model):
    f = tmp_path / "m.safetensors"
    save_llama(f, model, metadata={"n_head": H})
    p, info = load_llama(f, with_info=True)
    assert list(p) == list(model) and info["metadata"] == {"n_head": str(H)}
    assert (info["n_layer"], info["n_embd"], info["vocab_padded"], info["q_dim"],
            info["kv_dim"], info["ffn"]) == (L, C, VP, C, KV * C // H, F)
    for k in model:
        np.testing.assert_array_equal(p[k], model[k])
    # rotary inv_freq buffers are dropped; a tied (absent) lm_head is refused
    t = dict(model, **{f"model.layers.{i}.self_attn.rotary_emb.inv_freq":
                       np.ones(4, np.float32) for i in range(L)})
    write_safetensors(tmp_path / "b.safetensors", t)
    assert list(load_llama(tmp_path / "b.safetensors")) == list(model)
    t = {k: v for k, v in model.items() if k != "lm_head.weight"}
    write_safetensors(tmp_path / "tied.safetensors", t)
    with pytest.raises(ValueError, match="lm_head.weight missing"):
        load_llama(tmp_path / "tied.safetensors")
    t = dict(model, **{"model.layers.1.mlp.up_proj.weight": np.zeros((F, C + 1),
                                                                      np.float32)})
    write_safetensors(tmp_path / "bad.safetensors", t)
    with pytest.raises(ValueError, match="up_proj.weight has shape"):
        load_llama(tmp_path / "bad.safetensors")


def test_cli(tmp_path):
    py = sys.executable
    d = tmp_path / "d"
    subprocess.run([py, os.path.join(HERE, "make_test_data.py"), "--out-dir", str(d),
                    "--layers", "2", "--heads", "4", "--kv-heads", "2", "--embd", "32",
                    "--ffn", "48", "--vocab", "96", "--padded-vocab", "128",
                    "--tokens", "100", "--seed", "5", "--rope-theta", "500000"],
                   check=True, capture_output=True)
    params, info = load_llama(d / "model.safetensors", with_info=True)
    meta = info["metadata"]
    assert (meta["n_head"], meta["n_kv_head"], meta["vocab_size"]) == ("4", "2", "96")
    assert float(meta["rope_theta"]) == 500000.0 and float(meta["norm_eps"]) == 1e-5
    assert meta["format"] == "pt"
    for k, x in params.items():
        if x.ndim == 1:  # perturbed gains
            assert 0 < np.abs(x - 1).max() < 0.2, k
        else:
            assert abs(float(x.std()) - 0.02) < 0.005, k
    # heads / kv heads / theta / eps / valid vocab come from the metadata
    common = ["--model", str(d / "model.safetensors"), "--data", str(d / "tokens.bin"),
              "--batch", "2", "--seq", "8"]
    ref = os.path.join(HERE, "reference.py")
    out = subprocess.run([py, ref, "eval", *common, "--steps", "7",
                          "--dump-logits", str(tmp_path / "l.npy")],
                         check=True, capture_output=True, text=True).stdout.split("\n")
    lines = [ln for ln in out if ln]
    assert len(lines) == 7 and all(ln.startswith(f"step {i} loss ")
                                   for i, ln in enumerate(lines))
    toks = read_tokens(d / "tokens.bin")
    ids, tg = batch(toks, 6, 2, 8)  # step 6 wraps (6*16+17 > 100)
    want = np_loss(params, ids, tg, 4, 2, 96, theta=500000.0)
    assert float(lines[6].split()[-1]) == pytest.approx(want, rel=1e-5)
    assert np.load(tmp_path / "l.npy").shape == (7, 2, 8, 128)
    out = subprocess.run([py, ref, "grads", *common, "--out",
                          str(tmp_path / "g.safetensors")],
                         check=True, capture_output=True, text=True).stdout
    assert out.startswith("step 0 loss ")
    assert list(load_llama(tmp_path / "g.safetensors")) == list(params)
    out = subprocess.run([py, ref, "train", *common, "--steps", "3", "--lr", "1e-3",
                          "--weight-decay", "0.1", "--grad-clip", "1.0"],
                         check=True, capture_output=True, text=True).stdout.split("\n")
    rows = [ln.split() for ln in out if ln]
    assert len(rows) == 3 and [r[0] for r in rows] == ["step"] * 3
    assert rows[0][4] == "grad_norm" and rows[0][2] == "loss"
    assert float(rows[0][3]) == float(lines[0].split()[-1])  # same step-0 loss
    # greedy generation == argmax of the numpy forward over the sequence so far
    out = subprocess.run([py, ref, "generate", "--model", str(d / "model.safetensors"),
                          "--prompt-tokens", "3,14,15", "--max-new", "3"],
                         check=True, capture_output=True, text=True).stdout
    gen = json.loads(out)["generated"]
    seq = [3, 14, 15]
    for _ in range(3):
        logits = np_forward(params, np.array([seq]), 4, 2, theta=500000.0)
        seq.append(int(np.argmax(logits[0, -1, :96])))
    assert gen == [seq[3:]]
