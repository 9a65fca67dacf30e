"""Self-tests of the GPT-2 reference: pytest utils/gpt2_reference"""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gpt2_jax  # noqa: E402
from make_test_data import gpt2_init  # noqa: E402
from safetensors_io import (load_gpt2, read_safetensors, save_gpt2,  # noqa: E402
                            write_safetensors)
from tokens_io import batch, read_tokens, write_tokens  # noqa: E402

L, H, C, V, VP, CTX, B, T = 2, 4, 32, 96, 128, 16, 2, 8


@pytest.fixture(scope="module")
def model():
    # GPT-2 init with 2-D weights scaled x5 (std 0.1) so that attention and the
    # head split measurably change the loss; biases / LN params perturbed.
    p = gpt2_init(L, C, VP, CTX, seed=1, perturb=0.1)
    return {k: (v * 5 if v.ndim == 2 else v) for k, v in p.items()}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    toks = rng.integers(0, V, size=200).astype(np.uint16)
    return batch(toks, 0, B, T)


# ---------------------------------------------------------------- numpy fp64
def np_ln(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def np_gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def np_loss(p, ids, tg, heads, valid_vocab):
    p = {k: np.asarray(v, np.float64) for k, v in p.items()}
    Bn, Tn = ids.shape
    Cn = p["wte.weight"].shape[1]
    D = Cn // heads
    nl = sum(1 for k in p if k.endswith("ln_1.weight"))
    x = p["wte.weight"][ids] + p["wpe.weight"][:Tn]
    for i in range(nl):
        q = f"h.{i}."
        h = np_ln(x, p[q + "ln_1.weight"], p[q + "ln_1.bias"])
        qkv = h @ p[q + "attn.c_attn.weight"] + p[q + "attn.c_attn.bias"]
        out = np.zeros((Bn, Tn, Cn))
        for b in range(Bn):
            for hd in range(heads):
                qh = qkv[b, :, hd * D:(hd + 1) * D]
                kh = qkv[b, :, Cn + hd * D:Cn + (hd + 1) * D]
                vh = qkv[b, :, 2 * Cn + hd * D:2 * Cn + (hd + 1) * D]
                for t in range(Tn):
                    s = kh[:t + 1] @ qh[t] / np.sqrt(D)
                    w = np.exp(s - s.max())
                    w /= w.sum()
                    out[b, t, hd * D:(hd + 1) * D] = w @ vh[:t + 1]
        x = x + out @ p[q + "attn.c_proj.weight"] + p[q + "attn.c_proj.bias"]
        h = np_ln(x, p[q + "ln_2.weight"], p[q + "ln_2.bias"])
        h = np_gelu(h @ p[q + "mlp.c_fc.weight"] + p[q + "mlp.c_fc.bias"])
        x = x + h @ p[q + "mlp.c_proj.weight"] + p[q + "mlp.c_proj.bias"]
    x = np_ln(x, p["ln_f.weight"], p["ln_f.bias"])
    logits = (x @ p["wte.weight"].T)[..., :valid_vocab]
    m = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(-1)) + m[..., 0]
    tgt = np.take_along_axis(logits, tg[..., None], -1)[..., 0]
    return float(np.mean(lse - tgt))


# ---------------------------------------------------------------- I/O
def test_safetensors_roundtrip(tmp_path, model):
    f = tmp_path / "m.safetensors"
    save_gpt2(f, model, metadata={"n_head": H})
    back, meta = read_safetensors(f, with_metadata=True)
    assert meta == {"n_head": str(H)}
    assert list(back) == list(model)
    for k in model:
        assert back[k].dtype == np.float32
        np.testing.assert_array_equal(back[k], model[k])
    # header length is 8-byte aligned, data follows immediately
    raw = open(f, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    assert n % 8 == 0
    assert len(raw) == 8 + n + sum(v.nbytes for v in model.values())


def test_safetensors_prefix_buffers_and_half(tmp_path, model):
    f = tmp_path / "hf.safetensors"
    t = {"transformer." + k: v for k, v in model.items()}
    for i in range(L):
        t[f"transformer.h.{i}.attn.bias"] = np.tril(np.ones((1, 1, CTX, CTX), np.float32))
        t[f"transformer.h.{i}.attn.masked_bias"] = np.array(-1e4, np.float32)
    t["lm_head.weight"] = model["wte.weight"]
    write_safetensors(f, t)
    p, info = load_gpt2(f, with_info=True)
    assert info["prefix"] == "transformer." and info["n_layer"] == L
    assert info["vocab_padded"] == VP and info["n_ctx"] == CTX and info["n_embd"] == C
    assert list(p) == list(model)
    for k in model:
        np.testing.assert_array_equal(p[k], model[k])
    # F16 reads back into float32
    f2 = tmp_path / "h.safetensors"
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    write_safetensors(f2, {"x": x.astype(np.float16)})
    y = read_safetensors(f2)["x"]
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, x.astype(np.float16).astype(np.float32))
    # BF16: hand-made header
    import json
    import struct
    bits = (x.view(np.uint32) >> 16).astype("<u2")
    hdr = json.dumps({"x": {"dtype": "BF16", "shape": [3, 4],
                            "data_offsets": [0, bits.nbytes]}}).encode()
    f3 = tmp_path / "bf.safetensors"
    f3.write_bytes(struct.pack("<Q", len(hdr)) + hdr + bits.tobytes())
    z = read_safetensors(f3)["x"]
    np.testing.assert_array_equal(z, (bits.astype(np.uint32) << 16).view(np.float32))
    np.testing.assert_allclose(z, x, rtol=1e-2)


def test_safetensors_crosscheck_library(tmp_path, model):
    st = pytest.importorskip("safetensors.numpy")
    f = tmp_path / "m.safetensors"
    save_gpt2(f, model)
    back = st.load_file(str(f))
    for k in model:
        np.testing.assert_array_equal(back[k], model[k])
    st.save_file(model, str(tmp_path / "lib.safetensors"))
    back = read_safetensors(tmp_path / "lib.safetensors")
    for k in model:
        np.testing.assert_array_equal(back[k], model[k])


def test_tokens_32_bit_layout(tmp_path):
    # Llama 3's vocabulary: llm.c's magic 20240801, version 7, uint32 ids.
    toks = np.array([0, 65536, 128255, 7])
    f = tmp_path / "t32.bin"
    write_tokens(f, toks)
    raw = np.fromfile(f, dtype="<i4", count=256)
    assert raw[0] == 20240801 and raw[1] == 7 and raw[2] == 4
    assert os.path.getsize(f) == 256 * 4 + 4 * 4
    np.testing.assert_array_equal(read_tokens(f), toks)
    write_tokens(f, [1, 2], wide=True)
    assert np.fromfile(f, dtype="<i4", count=1)[0] == 20240801
    with pytest.raises(ValueError, match="uint16"):
        write_tokens(f, [70000], wide=False)


def test_tokens_roundtrip_and_batch(tmp_path):
    toks = np.arange(23, dtype=np.uint16) + 1000
    f = tmp_path / "t.bin"
    write_tokens(f, toks)
    raw = np.fromfile(f, dtype="<i4", count=256)
    assert raw[0] == 20240520 and raw[1] == 1 and raw[2] == 23
    assert os.path.getsize(f) == 256 * 4 + 23 * 2
    back = read_tokens(f)
    np.testing.assert_array_equal(back, toks)
    # step 0: tokens [0, 7)
    x, y = batch(back, 0, 2, 3)
    np.testing.assert_array_equal(x, [[1000, 1001, 1002], [1003, 1004, 1005]])
    np.testing.assert_array_equal(y, [[1001, 1002, 1003], [1004, 1005, 1006]])
    assert x.dtype == np.int32 and y.dtype == np.int32
    # step 3: tokens [18, 25) -> 18..22 then wraps to 0, 1
    x, y = batch(back, 3, 2, 3)
    np.testing.assert_array_equal(x, [[1018, 1019, 1020], [1021, 1022, 1000]])
    np.testing.assert_array_equal(y, [[1019, 1020, 1021], [1022, 1000, 1001]])
    # step 4: starts at 24 = 1 (mod 23)
    x, _ = batch(back, 4, 2, 3)
    assert x[0, 0] == 1001


# ---------------------------------------------------------------- model
def test_loss_matches_numpy(model, data):
    ids, tg = data
    loss, logits = gpt2_jax.eval_loss(gpt2_jax.to_jax(model), ids, tg, H, V)
    ref = np_loss(model, ids, tg, H, V)
    assert logits.shape == (B, T, VP)
    assert abs(float(loss) - ref) <= 1e-5 * abs(ref), (float(loss), ref)
    # and with a different head count the loss differs (head split matters)
    ref2 = np_loss(model, ids, tg, 2, V)
    loss2, _ = gpt2_jax.eval_loss(gpt2_jax.to_jax(model), ids, tg, 2, V)
    assert abs(float(loss2) - ref2) <= 1e-5 * abs(ref2)
    assert abs(ref2 - ref) > 1e-3


def test_padded_vocab_same_loss(model, data):
    ids, tg = data
    unpadded = dict(model, **{"wte.weight": model["wte.weight"][:V]})
    lp, _ = gpt2_jax.eval_loss(gpt2_jax.to_jax(model), ids, tg, H, V)
    lu, _ = gpt2_jax.eval_loss(gpt2_jax.to_jax(unpadded), ids, tg, H, V)
    assert abs(float(lp) - float(lu)) <= 1e-6 * abs(float(lu))
    # including the padded logits would change the loss
    lall, _ = gpt2_jax.eval_loss(gpt2_jax.to_jax(model), ids, tg, H, VP)
    assert abs(float(lall) - float(lu)) > 1e-3
    # gradients of the padded wte rows are exactly zero
    _, g = gpt2_jax.grads(gpt2_jax.to_jax(model), ids, tg, H, V)
    assert np.all(np.asarray(g["wte.weight"])[V:] == 0)
    _, gu = gpt2_jax.grads(gpt2_jax.to_jax(unpadded), ids, tg, H, V)
    np.testing.assert_allclose(np.asarray(g["wte.weight"])[:V],
                               np.asarray(gu["wte.weight"]), rtol=1e-4, atol=1e-8)


@pytest.mark.parametrize("name", ["wte.weight", "wpe.weight", "h.0.ln_1.weight",
                                  "h.0.attn.c_attn.weight", "h.1.attn.c_attn.bias",
                                  "h.0.attn.c_proj.weight", "h.1.ln_2.bias",
                                  "h.0.mlp.c_fc.weight", "h.1.mlp.c_proj.bias",
                                  "ln_f.weight", "ln_f.bias"])
def test_grads_finite_differences(model, data, name):
    ids, tg = data
    _, g = gpt2_jax.grads(gpt2_jax.to_jax(model), ids, tg, H, V)
    g = np.asarray(g[name])
    p64 = {k: v.astype(np.float64) for k, v in model.items()}
    flat = np.argsort(-np.abs(g).ravel())[:2]  # the two largest entries
    rng = np.random.default_rng(3)
    flat = np.concatenate([flat, rng.integers(0, g.size, 1)])  # and a random one
    if name == "wte.weight":  # row used only by the LM head
        flat = np.concatenate([flat, [np.ravel_multi_index((int(V) - 1, 0), g.shape)]])
    h = 1e-5
    scale = np.abs(g).max()
    for fi in flat:
        idx = np.unravel_index(fi, g.shape)
        orig = p64[name][idx]
        p64[name][idx] = orig + h
        lp = np_loss(p64, ids, tg, H, V)
        p64[name][idx] = orig - h
        lm = np_loss(p64, ids, tg, H, V)
        p64[name][idx] = orig
        fd = (lp - lm) / (2 * h)
        assert abs(g[idx] - fd) <= 1e-3 * abs(fd) + 1e-5 * scale, (name, idx, g[idx], fd)


def np_adamw(params, grads, m, v, t, lr, b1, b2, eps, wd, clip):
    """Hand-written torch AdamW + clip_grad_norm_ in float64."""
    norm = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads.values()))
    coef = min(clip / (norm + 1e-6), 1.0) if clip > 0 else 1.0
    out = {}
    for k, p in params.items():
        g = grads[k].astype(np.float64) * coef
        p = p.astype(np.float64)
        if p.ndim == 2:
            p = p * (1 - lr * wd)
        m[k] = b1 * m[k] + (1 - b1) * g
        v[k] = b2 * v[k] + (1 - b2) * g * g
        mhat = m[k] / (1 - b1 ** t)
        vhat = v[k] / (1 - b2 ** t)
        out[k] = p - lr * mhat / (np.sqrt(vhat) + eps)
    return out, norm


@pytest.mark.parametrize("clip", [0.0, 0.5])
def test_adamw_matches_numpy(model, clip):
    rng = np.random.default_rng(11)
    toks = rng.integers(0, V, size=300)
    batches = [batch(toks, s, B, T) for s in range(2)]
    hp = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)
    losses, norms, newp = gpt2_jax.adamw_train(
        model, batches, 2, grad_clip=clip, heads=H, valid_vocab=V,
        return_params=True, **hp)
    p = dict(model)
    m = {k: np.zeros(x.shape) for k, x in p.items()}
    v = {k: np.zeros(x.shape) for k, x in p.items()}
    for s in range(2):
        ids, tg = batches[s]
        pj = gpt2_jax.to_jax({k: x.astype(np.float32) for k, x in p.items()})
        loss, g = gpt2_jax.grads(pj, ids, tg, H, V)
        g = {k: np.asarray(x) for k, x in g.items()}
        np.testing.assert_allclose(losses[s], float(loss), rtol=1e-5)
        p, norm = np_adamw(p, g, m, v, s + 1, hp["lr"], hp["beta1"], hp["beta2"],
                           hp["eps"], hp["weight_decay"], clip)
        np.testing.assert_allclose(norms[s], norm, rtol=1e-5)
    if clip:
        assert norms[0] > clip  # clipping was active
    for k in p:
        diff = np.abs(newp[k] - p[k])
        if k.endswith("attn.c_attn.bias"):
            # The key bias has a mathematically zero gradient (it shifts every
            # score of a query by the same amount), so its fp32 gradient is
            # rounding noise that Adam normalises to O(lr) steps: skip it.
            diff[C:2 * C] = 0
        d = diff.max()
        assert d <= 2e-2 * hp["lr"], (k, d)
        # and the update moved every tensor
        assert np.abs(newp[k] - model[k]).max() > 0.5 * hp["lr"]
    # single-step exactness (same grads by construction)
    _, _, p1 = gpt2_jax.adamw_train(model, batches, 1, grad_clip=clip, heads=H,
                                    valid_vocab=V, return_params=True, **hp)
    _, g0 = gpt2_jax.grads(gpt2_jax.to_jax(model), *batches[0], H, V)
    g0 = {k: np.asarray(x) for k, x in g0.items()}
    m = {k: np.zeros(x.shape) for k, x in model.items()}
    v = {k: np.zeros(x.shape) for k, x in model.items()}
    ref1, _ = np_adamw(model, g0, m, v, 1, hp["lr"], hp["beta1"], hp["beta2"],
                       hp["eps"], hp["weight_decay"], clip)
    for k in ref1:
        np.testing.assert_allclose(p1[k], ref1[k], rtol=1e-6, atol=1e-6 * hp["lr"])


def test_weight_decay_only_on_matrices(model):
    dec = sorted(k for k, x in model.items() if gpt2_jax.decays(k, x.shape))
    assert dec == sorted(["wte.weight", "wpe.weight"] + [
        f"h.{i}.{n}.weight" for i in range(L)
        for n in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")])


# ---------------------------------------------------------------- CLI
def test_cli(tmp_path):
    py = sys.executable
    d = tmp_path / "d"
    subprocess.run([py, os.path.join(HERE, "make_test_data.py"), "--out-dir", str(d),
                    "--layers", "2", "--heads", "4", "--embd", "32", "--vocab", "96",
                    "--padded-vocab", "128", "--ctx", "16", "--tokens", "100",
                    "--seed", "5"], check=True, capture_output=True)
    common = ["--model", str(d / "model.safetensors"), "--data", str(d / "tokens.bin"),
              "--batch", "2", "--seq", "8", "--heads", "4", "--valid-vocab", "96"]
    ref = os.path.join(HERE, "reference.py")
    out = subprocess.run([py, ref, "eval", *common, "--steps", "8",
                          "--dump-logits", str(tmp_path / "l.npy")],
                         check=True, capture_output=True, text=True).stdout.split("\n")
    lines = [l for l in out if l]
    assert len(lines) == 8 and all(l.startswith(f"step {i} loss ") for i, l in enumerate(lines))
    params = load_gpt2(d / "model.safetensors")
    toks = read_tokens(d / "tokens.bin")
    ids, tg = batch(toks, 6, 2, 8)  # step 6 wraps (6*16+17 > 100)
    assert float(lines[6].split()[-1]) == pytest.approx(np_loss(params, ids, tg, 4, 96), rel=1e-5)
    assert np.load(tmp_path / "l.npy").shape == (8, 2, 8, 128)
    out = subprocess.run([py, ref, "grads", *common, "--out", str(tmp_path / "g.safetensors")],
                         check=True, capture_output=True, text=True).stdout
    assert out.startswith("step 0 loss ")
    g = load_gpt2(tmp_path / "g.safetensors")
    assert list(g) == list(params)
    out = subprocess.run([py, ref, "train", *common, "--steps", "3", "--lr", "1e-3",
                          "--weight-decay", "0.1", "--grad-clip", "1.0"],
                         check=True, capture_output=True, text=True).stdout.split("\n")
    lines = [l.split() for l in out if l]
    assert len(lines) == 3 and lines[0][0] == "step" and lines[0][4] == "grad_norm"
    assert float(lines[0][3]) == float(out[0].split()[3])
