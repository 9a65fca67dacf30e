"""llm.c token files and the batching rule used by the compiled training step.

File layout: 256 x int32 header (header[0] = 20240520 magic, header[1] = 1
version, header[2] = number of tokens, rest 0), then the tokens as uint16.
"""
import numpy as np

MAGIC = 20240520
VERSION = 1
HEADER_INTS = 256


def write_tokens(path, tokens):
    toks = np.asarray(tokens)
    if toks.ndim != 1:
        raise ValueError("tokens must be 1-D")
    if toks.size and (toks.min() < 0 or toks.max() > 0xFFFF):
        raise ValueError("tokens must fit in uint16")
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = MAGIC, VERSION, toks.size
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(toks.astype("<u2").tobytes())


def read_tokens(path):
    """Return the tokens of an llm.c file as a 1-D uint16 array."""
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(HEADER_INTS * 4), dtype="<i4")
        if header.size != HEADER_INTS or header[0] != MAGIC:
            raise ValueError(f"{path}: bad magic (expected {MAGIC})")
        if header[1] != VERSION:
            raise ValueError(f"{path}: unsupported version {header[1]}")
        n = int(header[2])
        toks = np.frombuffer(f.read(), dtype="<u2")
    if toks.size != n:
        raise ValueError(f"{path}: header says {n} tokens, file has {toks.size}")
    return toks.astype(np.uint16)


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
