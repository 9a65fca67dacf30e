#!/usr/bin/env python3
"""The CPU runtime's own kernels, timed alone on the 124M training step's
shapes: attention forward and backward (one layer), the vocabulary
cross-entropy's three passes (max, sum of exps, gradient) over the [B*T, V]
logits, and the gradient norm's sum of squares over every parameter. A
kernel's time in the step moves by a few milliseconds when it changes,
under the step's own run-to-run noise; alone it can be compared between two
builds of the runtime (RUNTIME=path/to/libmegatron_rt.so).

Inputs are fresh normal samples; each kernel's time is the best of several
batches. The logits are larger than the caches the step leaves them in, so
the cross-entropy runs on them cold (after a pass over another 600 MB), as
in the step, where the LM head's GEMM wrote them before its other work.

    OMP_NUM_THREADS=2 python3 bench/cpu/kernel_times.py [--batch 4] [--seq 64]
        [--heads 12] [--head-dim 64] [--vocab 50257] [--params 124439808]
Run scripts/build.sh first."""
import argparse
import ctypes
import os

import numpy as np

from timing import best_seconds

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNTIME = os.environ.get("RUNTIME", os.path.join(ROOT, "build", "lib", "libmegatron_rt.so"))

P, I64, F32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float


def runtime():
    rt = ctypes.CDLL(RUNTIME)
    rt.mrt_attention_fwd_f32.argtypes = [P, P, P] + [I64] * 4
    rt.mrt_attention_bwd_f32.argtypes = [P] * 5 + [I64] * 4
    rt.mrt_vocab_ce_local_max_f32.argtypes = [P, I64, I64, I64, I64, P]
    rt.mrt_vocab_ce_local_sumexp_f32.argtypes = [P, P, I64, I64, I64, I64, P, P, P]
    rt.mrt_vocab_ce_bwd_f32.argtypes = [P, P, P, P, I64, I64, I64, I64, F32, P]
    rt.mrt_sum_squares_f32.argtypes = [P, I64, P, I64]
    return rt


def best_ms(call, before=None, reps=1):
    return best_seconds(call, reps=reps, before=before) * 1e3


def normal(shape, rng):
    return rng.standard_normal(shape, dtype=np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--params", type=int, default=124439808)
    args = parser.parse_args()
    rt, rng = runtime(), np.random.default_rng(0)
    b, t, h, d, v = args.batch, args.seq, args.heads, args.head_dim, args.vocab
    n = b * t
    print(f"{RUNTIME}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")

    qkv, dout = normal((n, 3 * h * d), rng), normal((n, h * d), rng)
    out, dqkv = np.empty_like(dout), np.empty_like(qkv)
    lse = np.empty((b, h, t), np.float32)
    forward = lambda: rt.mrt_attention_fwd_f32(  # noqa: E731
        qkv.ctypes.data, out.ctypes.data, lse.ctypes.data, b, t, h, d)
    forward()
    backward = lambda: rt.mrt_attention_bwd_f32(  # noqa: E731
        qkv.ctypes.data, out.ctypes.data, dout.ctypes.data, lse.ctypes.data,
        dqkv.ctypes.data, b, t, h, d)
    print(f"attention B={b} T={t} H={h} D={d}: forward {best_ms(forward, reps=50):.3f} ms, "
          f"backward {best_ms(backward, reps=50):.3f} ms")

    logits, grad = normal((n, v), rng), np.empty((n, v), np.float32)
    targets = rng.integers(0, v, n).astype(np.int32)
    gmax, sumexp, tlogit = (np.empty(n, np.float32) for _ in range(3))
    flush = np.ones(600 << 18, np.float32)
    evict = lambda: flush.__iadd__(1.0)  # noqa: E731
    ce_max = lambda: rt.mrt_vocab_ce_local_max_f32(  # noqa: E731
        logits.ctypes.data, n, v, 0, v, gmax.ctypes.data)
    ce_sumexp = lambda: rt.mrt_vocab_ce_local_sumexp_f32(  # noqa: E731
        logits.ctypes.data, targets.ctypes.data, n, v, 0, v, gmax.ctypes.data,
        sumexp.ctypes.data, tlogit.ctypes.data)
    ce_bwd = lambda: rt.mrt_vocab_ce_bwd_f32(  # noqa: E731
        logits.ctypes.data, targets.ctypes.data, gmax.ctypes.data,
        sumexp.ctypes.data, n, v, 0, v, 1.0, grad.ctypes.data)
    ce_max()
    print(f"cross-entropy [{n}, {v}], cold: max {best_ms(ce_max, evict):.2f} ms, "
          f"sum of exps {best_ms(ce_sumexp, evict):.2f} ms, "
          f"gradient {best_ms(ce_bwd, evict):.2f} ms")

    grads, sums = np.full(args.params, 1e-3, np.float32), np.zeros(1, np.float64)
    squares = lambda: rt.mrt_sum_squares_f32(  # noqa: E731
        grads.ctypes.data, args.params, sums.ctypes.data, 0)
    ms = best_ms(squares)
    print(f"sum of squares over {args.params} floats: {ms:.2f} ms "
          f"({4 * args.params / ms / 1e6:.1f} GB/s)")


if __name__ == "__main__":
    main()
