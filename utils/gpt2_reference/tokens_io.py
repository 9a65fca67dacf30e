"""llm.c token files and the batching rule used by the compiled training step.

File layout: 256 x int32 header (header[0] the magic, header[1] the
version, header[2] the number of tokens, rest 0), then the tokens: GPT-2's
layout (magic 20240520, version 1) stores uint16, Llama 3's (magic 20240801,
version 7) uint32, for vocabularies past 65536 ids.
"""
import numpy as np

HEADER_INTS = 256
# magic -> (version, token dtype), as llm.c's dev/data/data_common.py.
LAYOUTS = {20240520: (1, "<u2"), 20240801: (7, "<u4")}
MAGIC = 20240520
MAGIC_32 = 20240801


def write_tokens(path, tokens, wide=None):
    """Write `tokens` in the 16-bit layout, or the 32-bit one when `wide`
    (by default: when an id needs it)."""
    toks = np.asarray(tokens)
    if toks.ndim != 1:
        raise ValueError("tokens must be 1-D")
    if toks.size and toks.min() < 0:
        raise ValueError("tokens must be non-negative")
    if wide is None:
        wide = bool(toks.size and toks.max() > 0xFFFF)
    if not wide and toks.size and toks.max() > 0xFFFF:
        raise ValueError("tokens must fit in uint16")
    magic = MAGIC_32 if wide else MAGIC
    version, dtype = LAYOUTS[magic]
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = magic, version, toks.size
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(toks.astype(dtype).tobytes())


def read_tokens(path):
    """Return the tokens of an llm.c file (either layout) as a 1-D array."""
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(HEADER_INTS * 4), dtype="<i4")
        if header.size != HEADER_INTS or int(header[0]) not in LAYOUTS:
            raise ValueError(f"{path}: bad magic (expected one of {sorted(LAYOUTS)})")
        version, dtype = LAYOUTS[int(header[0])]
        if header[1] != version:
            raise ValueError(f"{path}: unsupported version {header[1]}")
        n = int(header[2])
        toks = np.frombuffer(f.read(), dtype=dtype)
    if toks.size != n:
        raise ValueError(f"{path}: header says {n} tokens, file has {toks.size}")
    return toks.astype(np.int64)


def batch(tokens, step, B, T):
    """Inputs/targets [B,T] (int32) for training step `step`.

    Uses tokens [step*B*T, step*B*T + B*T + 1), indices taken modulo the
    number of tokens (wrap-around at the end of the file). Inputs are the
    first B*T of them, targets the same window shifted by one.
    """
    toks = np.asarray(tokens)
    n = toks.size
    if n < 2:
        raise ValueError("need at least 2 tokens")
    idx = (step * B * T + np.arange(B * T + 1, dtype=np.int64)) % n
    w = toks[idx].astype(np.int32)
    return w[:-1].reshape(B, T), w[1:].reshape(B, T)
