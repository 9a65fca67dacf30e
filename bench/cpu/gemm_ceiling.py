#!/usr/bin/env python3
"""The CPU step's GEMM ceiling: what sgemm reaches on the step's own shapes.

train_compare.py rates the training step against numpy/OpenBLAS sgemm on
2048-square matrices. The 124M step (B=4, T=64: M = B*T = 256 rows) runs
other shapes: this times each of its GEMMs (forward, input gradient, weight
gradient, with the step's transposes) on the same threads, with numpy's
OpenBLAS and with the two libraries the runtime chooses between by the CPU
(runtime/lib/gemm.cpp): oneDNN's sgemm and Debian's OpenMP build of
OpenBLAS. It prints each rate and their FLOP-weighted means as shares of
numpy's 2048-square rate measured in the same run: the share of that rate a
step made only of its GEMMs, each at that library's speed, would reach.
Their instruction sets can be capped to compare them on an AVX2 machine's
kernels: ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell.

    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 python3 bench/cpu/gemm_ceiling.py
        [--width 768] [--rows 256] [--vocab 50257] [--layers 12]
"""
import argparse
import ctypes
import time

import numpy as np


OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0"


def runtime_sgemms():
    """The two row-major sgemms the runtime chooses between (lib/gemm.cpp):
    oneDNN's and Debian's OpenMP build of OpenBLAS, each called as
    sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)."""
    i64, i32, f32, ptr = (ctypes.c_int64, ctypes.c_int, ctypes.c_float,
                          ctypes.c_void_p)
    dnnl = ctypes.CDLL("libdnnl.so.2").dnnl_sgemm
    dnnl.argtypes = [ctypes.c_char, ctypes.c_char, i64, i64, i64, f32, ptr,
                     i64, ptr, i64, f32, ptr, i64]
    dnnl.restype = ctypes.c_int
    cblas = ctypes.CDLL(OPENBLAS).cblas_sgemm
    cblas.argtypes = [i32, i32, i32, i32, i32, i32, f32, ptr, i32, ptr, i32,
                      f32, ptr, i32]
    cblas.restype = None
    row_major, no_trans, trans = 101, 111, 112
    return {
        "OpenBLAS": lambda ta, tb, *rest: cblas(
            row_major, trans if ta else no_trans, trans if tb else no_trans,
            *rest),
        "oneDNN": lambda ta, tb, *rest: dnnl(
            b"T" if ta else b"N", b"T" if tb else b"N", *rest),
    }


def operands(m, n, k, trans_a, trans_b):
    """Row-major A and B as stored (transposed ones [k, m] and [n, k])."""
    rng = np.random.default_rng(0)
    a = rng.random((k, m) if trans_a else (m, k), dtype=np.float32)
    b = rng.random((n, k) if trans_b else (k, n), dtype=np.float32)
    return a, b


def best_seconds(call, flops, seconds=0.5):
    """Best time of one call over three timed batches."""
    call()
    reps = max(3, int(seconds * 2e11 / flops))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(reps):
            call()
        best = min(best, (time.perf_counter() - start) / reps)
    return best


def rate(m, n, k, trans_a=False, trans_b=False, sgemm=None):
    """GFLOP/s of C[m, n] = op(A) op(B): numpy's, or sgemm's when given."""
    a, b = operands(m, n, k, trans_a, trans_b)
    c = np.empty((m, n), np.float32)
    if sgemm is None:
        at, bt = (a.T if trans_a else a), (b.T if trans_b else b)
        call = lambda: np.matmul(at, bt, out=c)
    else:
        args = (trans_a, trans_b, m, n, k, 1.0, a.ctypes.data, a.shape[1],
                b.ctypes.data, b.shape[1], 0.0, c.ctypes.data, n)
        call = lambda: sgemm(*args)
    flops = 2 * m * n * k
    return flops / best_seconds(call, flops) / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--layers", type=int, default=12)
    args = parser.parse_args()
    c, t, v = args.width, args.rows, args.vocab
    peak = rate(2048, 2048, 2048)
    # (name, m, n, k, transpose A, transpose B, calls per step)
    layer, head = args.layers, 1
    shapes = [
        ("qkv forward", t, 3 * c, c, False, False, layer),
        ("attn proj forward", t, c, c, False, False, layer),
        ("fc forward", t, 4 * c, c, False, False, layer),
        ("fc proj forward", t, c, 4 * c, False, False, layer),
        ("lm head forward", t, v, c, False, True, head),
        ("qkv input grad", t, c, 3 * c, False, True, layer),
        ("attn proj input grad", t, c, c, False, True, layer),
        ("fc input grad", t, c, 4 * c, False, True, layer),
        ("fc proj input grad", t, 4 * c, c, False, True, layer),
        ("lm head input grad", t, c, v, False, False, head),
        ("qkv weight grad", c, 3 * c, t, True, False, layer),
        ("attn proj weight grad", c, c, t, True, False, layer),
        ("fc weight grad", c, 4 * c, t, True, False, layer),
        ("fc proj weight grad", 4 * c, c, t, True, False, layer),
        ("lm head weight grad", v, c, t, True, False, head),
    ]
    sgemms = runtime_sgemms()
    print(f"numpy sgemm 2048^3: {peak:.1f} GFLOP/s; "
          + "; ".join(f"{library} {rate(2048, 2048, 2048, sgemm=sgemm):.1f}"
                      for library, sgemm in sgemms.items()))
    libraries = ["numpy"] + list(sgemms)
    print(f"{'GEMM':22} {'M x N x K':20} "
          + " ".join(f"{library + ' GFLOP/s':>16} {'%':>6}"
                     for library in libraries))
    flops, seconds = 0.0, dict.fromkeys(libraries, 0.0)
    for name, m, n, k, ta, tb, calls in shapes:
        rates = {"numpy": rate(m, n, k, ta, tb)}
        rates.update((library, rate(m, n, k, ta, tb, sgemm=sgemm))
                     for library, sgemm in sgemms.items())
        f = 2.0 * m * n * k * calls
        flops += f
        for library, r in rates.items():
            seconds[library] += f / (r * 1e9)
        print(f"{name:22} {m:>6}x{n:<6}x{k:<6} "
              + " ".join(f"{r:16.1f} {100 * r / peak:6.1f}"
                         for r in rates.values()))
    for library, s in seconds.items():
        mean = flops / s / 1e9
        print(f"FLOP-weighted mean, {library}: {mean:.1f} GFLOP/s, "
              f"{100 * mean / peak:.1f} % of numpy's sgemm 2048^3")

if __name__ == "__main__":
    main()
