"""megatron-run's choice of the next token (runtime/tools/megatron-run/
Sampling.h), written again from its description on a full row of logits:
greedy is the lowest id of the largest logit; sampling is Gumbel-max,
argmax over the kept tokens of z + g with z = logits / temperature in
float32 and g = -log(-log(u)), u from a splitmix64 hash of (seed, sequence,
step, token id). top-k keeps z >= the k-th largest z; top-p then keeps the
highest-probability tokens whose mass first reaches p (ties together)."""
import math

import numpy as np

_M = (1 << 64) - 1


def _mix(x):
    x ^= x >> 30
    x = (x * 0xbf58476d1ce4e5b9) & _M
    x ^= x >> 27
    x = (x * 0x94d049bb133111eb) & _M
    return x ^ (x >> 31)


def gumbel(seed, sequence, step, token):
    h = _mix((seed + 0x9e3779b97f4a7c15) & _M)
    h = _mix(h ^ sequence)
    h = _mix(h ^ step)
    h = _mix(h ^ token)
    u = ((h >> 11) + 0.5) * 2.0 ** -53
    return np.float32(-math.log(-math.log(u)))


def choose(logits, temperature, top_k, top_p, seed, sequence, step):
    logits = np.asarray(logits, np.float32)
    if temperature == 0:
        return int(np.argmax(logits))
    z = logits * np.float32(1.0 / temperature)
    keep = np.ones(z.size, bool)
    if 0 < top_k < z.size:
        keep &= z >= np.sort(z)[::-1][top_k - 1]
    if top_p < 1:
        kept = np.where(keep)[0]
        w = np.exp(z[kept].astype(np.float64) - z[kept].max())
        order = np.argsort(-z[kept], kind="stable")
        mass = np.cumsum(w[order]) / w.sum()
        last = order[int(np.argmax(mass >= top_p))]
        keep &= z >= z[kept][last]
    scores = np.full(z.size, -np.inf, np.float32)
    for v in np.where(keep)[0]:
        scores[v] = np.float32(z[v] + gumbel(seed, sequence, step, int(v)))
    return int(np.argmax(scores))
