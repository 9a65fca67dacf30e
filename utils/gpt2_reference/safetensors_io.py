"""Minimal safetensors reader/writer (no `safetensors` package needed) and
GPT-2 checkpoint helpers using Hugging Face names in Conv1D layout.

Format: 8-byte little-endian u64 header length N, N bytes of JSON header
  {name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
   "__metadata__": {str: str}}   (metadata optional)
followed by the raw little-endian tensor bytes (offsets relative to the end of
the header).
"""
import json
import re
import struct

import numpy as np

# safetensors dtype string -> numpy dtype (little endian). BF16 handled apart.
_DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"), "U64": np.dtype("<u8"), "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"), "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
_NP_TO_ST = {v: k for k, v in _DTYPES.items()}
_FLOAT_TYPES = ("F64", "F32", "F16", "BF16")


def read_safetensors(path, as_float32=True, with_metadata=False):
    """Return {name: np.ndarray} (and the metadata dict if with_metadata).

    Floating tensors (F64/F32/F16/BF16) are converted to float32 when
    as_float32 is true; integer tensors are returned unchanged.
    """
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} exceeds file size")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = memoryview(raw)[8 + n:]
    metadata = header.pop("__metadata__", None) or {}
    out = {}
    for name, info in header.items():
        dt, shape = info["dtype"], [int(s) for s in info["shape"]]
        b, e = info["data_offsets"]
        if not (0 <= b <= e <= len(data)):
            raise ValueError(f"{path}: bad data_offsets for {name}")
        count = int(np.prod(shape)) if shape else 1
        if dt == "BF16":
            if e - b != 2 * count:
                raise ValueError(f"{path}: size mismatch for {name}")
            u = np.frombuffer(data[b:e], dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32).reshape(shape)
        else:
            if dt not in _DTYPES:
                raise ValueError(f"{path}: unsupported dtype {dt} for {name}")
            npdt = _DTYPES[dt]
            if e - b != npdt.itemsize * count:
                raise ValueError(f"{path}: size mismatch for {name}")
            arr = np.frombuffer(data[b:e], dtype=npdt).reshape(shape)
        if as_float32 and dt in _FLOAT_TYPES:
            arr = arr.astype(np.float32)
        out[name] = np.array(arr)  # own, writable, native-endian copy
    return (out, metadata) if with_metadata else out


def write_safetensors(path, tensors, metadata=None):
    """Write {name: array-like} to `path`. Float arrays keep their dtype
    (float32 / float16 / float64); pass float32 arrays for GPT-2 checkpoints."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        a = np.asarray(t)
        dt = a.dtype.newbyteorder("<") if a.dtype.itemsize > 1 else a.dtype
        if dt not in _NP_TO_ST:
            raise ValueError(f"unsupported dtype {a.dtype} for {name}")
        blob = np.ascontiguousarray(a, dtype=dt).tobytes()
        header[name] = {"dtype": _NP_TO_ST[dt], "shape": list(a.shape),
                        "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    if metadata:
        header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()},
                  **header}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((-len(hb)) % 8)  # pad to 8-byte alignment, like the library
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for blob in blobs:
            f.write(blob)


# --------------------------------------------------------------------------
# GPT-2 specific helpers
# --------------------------------------------------------------------------
_BUFFER_RE = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")
_LAYER_RE = re.compile(r"^h\.(\d+)\.")


def gpt2_param_names(n_layer):
    names = ["wte.weight", "wpe.weight"]
    for i in range(n_layer):
        p = f"h.{i}."
        names += [p + "ln_1.weight", p + "ln_1.bias",
                  p + "attn.c_attn.weight", p + "attn.c_attn.bias",
                  p + "attn.c_proj.weight", p + "attn.c_proj.bias",
                  p + "ln_2.weight", p + "ln_2.bias",
                  p + "mlp.c_fc.weight", p + "mlp.c_fc.bias",
                  p + "mlp.c_proj.weight", p + "mlp.c_proj.bias"]
    return names + ["ln_f.weight", "ln_f.bias"]


def gpt2_param_shapes(n_layer, n_embd, vocab_padded, n_ctx):
    C = n_embd
    shapes = {"wte.weight": (vocab_padded, C), "wpe.weight": (n_ctx, C),
              "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for i in range(n_layer):
        p = f"h.{i}."
        shapes.update({
            p + "ln_1.weight": (C,), p + "ln_1.bias": (C,),
            p + "attn.c_attn.weight": (C, 3 * C), p + "attn.c_attn.bias": (3 * C,),
            p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
            p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
            p + "mlp.c_fc.weight": (C, 4 * C), p + "mlp.c_fc.bias": (4 * C,),
            p + "mlp.c_proj.weight": (4 * C, C), p + "mlp.c_proj.bias": (C,)})
    return {n: shapes[n] for n in gpt2_param_names(n_layer)}


def gpt2_config_from_params(params):
    """Infer n_layer, n_embd, vocab_padded, n_ctx from a canonical param dict."""
    layers = {int(m.group(1)) for n in params if (m := _LAYER_RE.match(n))}
    n_layer = max(layers) + 1 if layers else 0
    vp, C = params["wte.weight"].shape
    return {"n_layer": n_layer, "n_embd": int(C), "vocab_padded": int(vp),
            "n_ctx": int(params["wpe.weight"].shape[0])}


def load_gpt2(path, with_info=False):
    """Read a GPT-2 checkpoint into {canonical HF name: float32 array}.

    Accepts names with or without a `transformer.` prefix, drops the
    `h.i.attn.bias` / `h.i.attn.masked_bias` buffers and a tied
    `lm_head.weight`, and checks the set of names and all shapes.
    With with_info, also returns {"prefix": str, "metadata": dict, **config}.
    """
    raw, metadata = read_safetensors(path, with_metadata=True)
    params, prefix, lm_head = {}, "", None
    for name, arr in raw.items():
        n = name
        if n.startswith("transformer."):
            n, prefix = n[len("transformer."):], "transformer."
        if _BUFFER_RE.match(n):
            continue
        if n == "lm_head.weight":
            lm_head = arr
            continue
        params[n] = arr
    if "wte.weight" not in params or "wpe.weight" not in params:
        raise ValueError(f"{path}: wte.weight / wpe.weight missing")
    cfg = gpt2_config_from_params(params)
    expected = gpt2_param_shapes(cfg["n_layer"], cfg["n_embd"],
                                 cfg["vocab_padded"], cfg["n_ctx"])
    missing = sorted(set(expected) - set(params))
    extra = sorted(set(params) - set(expected))
    if missing or extra:
        raise ValueError(f"{path}: missing {missing}, unexpected {extra}")
    for n, s in expected.items():
        if tuple(params[n].shape) != s:
            raise ValueError(f"{path}: {n} has shape {params[n].shape}, expected {s}")
    if lm_head is not None and not np.array_equal(lm_head, params["wte.weight"]):
        raise ValueError(f"{path}: lm_head.weight is not tied to wte.weight")
    params = {n: params[n] for n in expected}  # canonical order
    if with_info:
        return params, {"prefix": prefix, "metadata": metadata, **cfg}
    return params


def save_gpt2(path, params, metadata=None, prefix=""):
    write_safetensors(path, {prefix + n: np.asarray(v, dtype=np.float32)
                             for n, v in params.items()}, metadata)
