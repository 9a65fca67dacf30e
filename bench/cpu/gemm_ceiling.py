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
step made only of its GEMMs, each at that library's speed, would reach. It
also rates them against the machine's FMA peak (fma_peak.c, compiled here):
what a GEMM kernel better than the libraries' could still gain.
Their instruction sets can be capped to compare them on an AVX2 machine's
kernels: ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell.

Then the step's ceiling on this machine: the two passes over memory every
fp32 AdamW step makes beside its GEMMs, timed on the step's parameter count
(the AdamW update, 28 bytes a parameter, adamw_pass.c compiled here with
-march=native; the gradient norm's sum of squares, the runtime's own
mrt_sum_squares_f32, 4 bytes), added to the GEMMs' time at the faster
library's rates. The step's model FLOPs over that time, as a share of
numpy's 2048-square rate, bound what train_compare.py can report for the
step: attention, the cross-entropy, the norms and every wait come on top.
The model FLOPs and parameters are the compiler's (the step's manifest), so
this needs scripts/build.sh first.

--precision bf16 times the bf16 step's GEMMs instead: the runtime's own
bf16 entry points (mrt_gemm_bf16, and mrt_gemm_bf16_f32 for the weight
gradients, which stay fp32), on the engine it picks for this CPU (oneDNN's
bf16 matmul; mrt_gemm_engines names it), with the same fp32 passes over
the parameters (the masters and AdamW state are fp32; the bf16 copy the
update also writes, 2 bytes a parameter, is left out, so the ceiling is a
little low). bench/cpu/bf16_compare.py holds the bf16 step against it.

    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 python3 bench/cpu/gemm_ceiling.py
        [--width 768] [--batch 4] [--seq 64] [--vocab 50257] [--layers 12]
        [--heads 12] [--precision fp32|bf16]
"""
import argparse
import ctypes
import json
import math
import os
import subprocess
import tempfile

import numpy as np

from timing import best_seconds

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")
RUNTIME = os.path.join(ROOT, "build", "lib", "libmegatron_rt.so")


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


def gemm_seconds(call, flops, seconds=0.5):
    """Best time of one call over three timed batches of about `seconds`."""
    return best_seconds(call, reps=max(3, int(seconds * 2e11 / flops)), batches=3)


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
    return flops / gemm_seconds(call, flops) / 1e9


def runtime_bf16_gemms():
    """The runtime's bf16 GEMMs (megatron_rt/gemm.h) and its line naming
    their engine: a bf16 result, or an fp32 one (the weight gradients)."""
    rt = ctypes.CDLL(RUNTIME)
    i64, i32, f32, ptr = (ctypes.c_int64, ctypes.c_int, ctypes.c_float,
                          ctypes.c_void_p)
    for name in ("mrt_gemm_bf16", "mrt_gemm_bf16_f32"):
        getattr(rt, name).argtypes = [i32, i32, i64, i64, i64, f32, ptr, i64,
                                      ptr, i64, f32, ptr, i64]
        getattr(rt, name).restype = None
    rt.mrt_gemm_engines.restype = ctypes.c_char_p
    return rt, rt.mrt_gemm_engines().decode()


def bf16_rate(rt, m, n, k, trans_a=False, trans_b=False, fp32_result=False):
    """GFLOP/s of the runtime's bf16 GEMM C[m, n] = op(A) op(B) (bf16 bits
    held as uint16)."""
    a, b = (x.view(np.uint32).astype(np.uint16) for x in
            (np.asarray(o, np.float32) for o in operands(m, n, k, trans_a, trans_b)))
    c = np.empty((m, n), np.float32 if fp32_result else np.uint16)
    gemm = rt.mrt_gemm_bf16_f32 if fp32_result else rt.mrt_gemm_bf16
    args = (int(trans_a), int(trans_b), m, n, k, 1.0, a.ctypes.data, a.shape[1],
            b.ctypes.data, b.shape[1], 0.0, c.ctypes.data, n)
    flops = 2 * m * n * k
    return flops / gemm_seconds(lambda: gemm(*args), flops) / 1e9


def step_gemms(args, vocab):
    """The training step's GEMMs: (name, m, n, k, transpose A, transpose B,
    calls per step), the LM head's at the step's padded `vocab`; the weight
    gradients' names end in "weight grad"."""
    c, t, v = args.width, args.batch * args.seq, vocab
    layer, head = args.layers, 1
    return [
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


def bf16_gemm_seconds(args, verbose=True):
    """The bf16 step's GEMMs' time per step at the runtime's bf16 rates, and
    the line naming their engine."""
    rt, engines = runtime_bf16_gemms()
    seconds = 0.0
    for name, m, n, k, ta, tb, calls in step_gemms(args, step_counts(args)[2]):
        r = bf16_rate(rt, m, n, k, ta, tb, fp32_result=name.endswith("weight grad"))
        seconds += 2.0 * m * n * k * calls / (r * 1e9)
        if verbose:
            print(f"{name:22} {m:>6}x{n:<6}x{k:<6} {r:16.1f}")
    return seconds, engines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    args = parser.parse_args()
    peak = rate(2048, 2048, 2048)
    if args.precision == "bf16":
        print(f"{'GEMM':22} {'M x N x K':20} {'bf16 GFLOP/s':>16}")
        gemm_time, engines = bf16_gemm_seconds(args)
        print(f"GEMMs {engines}")
        print_step_ceiling(args, peak, gemm_time, "the runtime's bf16 rates")
        return
    shapes = step_gemms(args, step_counts(args)[2])
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
    fma = fma_peak_rate()
    for library, s in seconds.items():
        mean = flops / s / 1e9
        print(f"FLOP-weighted mean, {library}: {mean:.1f} GFLOP/s, "
              f"{100 * mean / peak:.1f} % of numpy's sgemm 2048^3, "
              f"{100 * mean / fma:.1f} % of the FMA peak")
    print(f"FMA peak (independent vector multiply-adds on every thread): "
          f"{fma:.1f} GFLOP/s; numpy's sgemm 2048^3 at {100 * peak / fma:.1f} % of it")
    print_step_ceiling(args, peak, min(seconds[library] for library in sgemms),
                       "the faster library's rates")


def step_counts(args):
    """The training step's model FLOPs, parameter count and padded
    vocabulary as the compiler counts them (its manifest; train_compare.py
    rates steps by the same)."""
    with tempfile.TemporaryDirectory() as tmp:
        program = os.path.join(tmp, "gpt2.mlir")
        subprocess.run([os.path.join(BIN, "gpt2-mlir"), "--preset=124M",
                        f"--embd={args.width}", f"--layers={args.layers}",
                        f"--heads={args.heads}",
                        f"--vocab={args.vocab}", f"--batch={args.batch}",
                        f"--seq={args.seq}", "-o", program], check=True)
        manifest = json.loads(subprocess.run(
            [os.path.join(BIN, "megatron-compile"), program, "--train",
             "--emit=manifest", "-o", "-"],
            check=True, capture_output=True, text=True).stdout)
    params = sum(math.prod(arg["local_shape"]) for arg in manifest["args"]
                 if arg["role"] == "param")
    wte = next(arg for arg in manifest["args"] if arg["name"] == "wte.weight")
    return manifest["flops"]["train_step"], params, wte["global_shape"][0]


def compiled_here(name):
    """The function `name` of bench/cpu/`name`.c, compiled for this CPU into
    a temporary library."""
    with tempfile.TemporaryDirectory() as tmp:
        library = os.path.join(tmp, name + ".so")
        subprocess.run(["cc", "-O3", "-march=native", "-fno-math-errno", "-fopenmp", "-shared",
                        "-fPIC", os.path.join(os.path.dirname(__file__), name + ".c"),
                        "-o", library, "-lm"], check=True)
        return getattr(ctypes.CDLL(library), name)


def adamw_pass():
    function = compiled_here("adamw_pass")
    function.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] + [ctypes.c_float] * 8
    function.restype = None
    return function


def fma_peak_rate():
    """GFLOP/s of fma_peak.c's independent multiply-add chains on every
    OpenMP thread: the rate no GEMM kernel can pass."""
    function = compiled_here("fma_peak")
    function.argtypes = [ctypes.c_int64]
    function.restype = ctypes.c_double
    iterations = 20_000_000
    flops = function(iterations)
    return flops / best_seconds(lambda: function(iterations)) / 1e9


def memory_pass_seconds(params):
    """Best times of the step's two passes over all parameters: the AdamW
    update and the gradient norm's sum of squares, on arrays as far larger
    than the caches as the step's."""
    p, g, m, v = (np.full(params, value, np.float32) for value in (0.1, 1e-3, 0.0, 0.0))
    update = adamw_pass()
    args = [array.ctypes.data for array in (p, g, m, v)] + [
        params, 3e-4, 0.9, 0.999, 1e-8, 0.0, 1.0, 0.1, 0.001]
    rt = ctypes.CDLL(RUNTIME)
    rt.mrt_sum_squares_f32.argtypes = [ctypes.c_void_p, ctypes.c_int64,
                                       ctypes.c_void_p, ctypes.c_int64]
    sums = np.zeros(1, np.float64)
    norm = lambda: rt.mrt_sum_squares_f32(g.ctypes.data, params,  # noqa: E731
                                          sums.ctypes.data, 0)
    # A pass over gigabytes is long enough to time alone.
    return best_seconds(lambda: update(*args)), best_seconds(norm)


def step_ceiling_seconds(args, gemm_time):
    """The step's ceiling: its GEMMs' time plus the two passes over its
    parameters; returns (ceiling, model FLOPs, parameters, AdamW pass,
    norm pass)."""
    step_flops, params, _ = step_counts(args)
    update, norm = memory_pass_seconds(params)
    return gemm_time + update + norm, step_flops, params, update, norm


def print_step_ceiling(args, peak, gemm_time, rates):
    ceiling, step_flops, params, update, norm = step_ceiling_seconds(args, gemm_time)
    print(f"the step's memory passes over {params} fp32 parameters: AdamW "
          f"{update * 1e3:.1f} ms ({28 * params / update / 1e9:.1f} GB/s), "
          f"gradient norm {norm * 1e3:.1f} ms ({4 * params / norm / 1e9:.1f} GB/s)")
    rate = step_flops / ceiling / 1e9
    print(f"step ceiling: {step_flops / 1e9:.1f} model GFLOP in {ceiling * 1e3:.1f} ms "
          f"(GEMMs {gemm_time * 1e3:.1f} at {rates}, and the "
          f"two passes), {rate:.1f} GFLOP/s, {100 * rate / peak:.1f} % of numpy's "
          f"sgemm 2048^3")

if __name__ == "__main__":
    main()
