#!/usr/bin/env python3
"""Measures this machine's rates into a hardware file for the performance
model (megatron-opt --tp-explain="hardware=FILE.json") and megatron-run's
MFU (--hardware): the runtime's fp32 GEMM rate (mrt_gemm_f32 on a square
GEMM) on one core ("flops_per_second_per_core") and on every core of the
machine ("flops_per_second", with its "threads" and "cores"), the same for
its bf16 GEMM (mrt_gemm_bf16: "bf16_flops_per_second_per_core",
"bf16_flops_per_second", the peak of bf16 steps; left out where the
runtime has no bf16 GEMM on this CPU), memory bandwidth (a large array
copy, reads plus writes), and the MPI all-reduce's per-step latency and link
bandwidth between two ranks (mrt_all_reduce_f32 on a tiny and a large
buffer, ring formulas inverted).

  bench/cpu/measure_hardware.py --out out/bench/cpu-hardware.json
Run scripts/build.sh first."""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNTIME = os.path.join(ROOT, "build", "lib", "libmegatron_rt.so")


def best_seconds(function, repeats=5):
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def gemm_flops_per_second(rt, precision, n=1024):
    """mrt_gemm_f32's or mrt_gemm_bf16's rate on n-square matrices (bf16
    bits held as uint16)."""
    a, b, c = (np.random.rand(n, n).astype(np.float32) for _ in range(3))
    if precision == "bf16":
        a, b, c = (x.view(np.uint32).astype(np.uint16) for x in (a, b, c))
    ptr = lambda x: x.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    gemm = getattr(rt, f"mrt_gemm_{precision}")
    gemm.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_int64] * 3 + [
        ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
        ctypes.c_float, ctypes.c_void_p, ctypes.c_int64]
    seconds = best_seconds(lambda: gemm(0, 0, n, n, n, 1.0, ptr(a), n, ptr(b), n,
                                        0.0, ptr(c), n))
    return 2 * n ** 3 / seconds


def gemm_rate_on_threads(rt, threads, precision="f32"):
    """The GEMM rate with `threads` OpenMP threads (the runtime's libgomp)."""
    ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
    return gemm_flops_per_second(rt, precision)


def bf16_rates(rt, cores):
    """The bf16 fields, or none where the runtime cannot run bf16 GEMMs."""
    rt.mrt_gemm_error.restype = ctypes.c_char_p
    rt.mrt_gemm_error.argtypes = [ctypes.c_int]
    why = rt.mrt_gemm_error(1)
    if why:
        print(f"no bf16 rates: {why.decode()}", file=sys.stderr)
        return {}
    return {"bf16_flops_per_second_per_core": gemm_rate_on_threads(rt, 1, "bf16"),
            "bf16_flops_per_second": gemm_rate_on_threads(rt, cores, "bf16")}


def memory_bytes_per_second(size=1 << 28):
    source = np.ones(size // 4, dtype=np.float32)
    target = np.empty_like(source)
    return 2 * size / best_seconds(lambda: np.copyto(target, source))


def all_reduce_worker():
    """Runs in each of two MPI ranks; rank 0 prints the times as JSON."""
    rt = ctypes.CDLL(RUNTIME)
    rt.mrt_context_create.restype = ctypes.c_void_p
    error = ctypes.create_string_buffer(256)
    # tp 2, no collective deadline (0 s), the error buffer.
    ctx = rt.mrt_context_create(ctypes.c_int64(2), ctypes.c_double(0.0), error,
                                ctypes.c_size_t(256))
    if not ctx:
        sys.exit(error.value.decode())
    rt.mrt_all_reduce_f32.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                      ctypes.c_int64, ctypes.c_int]
    rt.mrt_world_rank.restype = ctypes.c_int64
    times = {}
    for count in (1, 1 << 24):
        buffer = np.ones(count, dtype=np.float32)
        times[count] = best_seconds(lambda: rt.mrt_all_reduce_f32(
            ctx, 1, buffer.ctypes.data, count, 0), repeats=20 if count == 1 else 3)
    if rt.mrt_world_rank(ctypes.c_void_p(ctx)) == 0:
        print(json.dumps({"small_seconds": times[1], "large_seconds": times[1 << 24],
                          "large_bytes": 4 * (1 << 24)}))
    rt.mrt_context_destroy(ctypes.c_void_p(ctx))  # finalizes MPI


def all_reduce_rates():
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1")
    out = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", sys.executable,
                          os.path.abspath(__file__), "--all-reduce-worker"],
                         env=env, check=True, capture_output=True, text=True).stdout
    measured = json.loads(out.strip().splitlines()[-1])
    ranks = 2
    steps = 2 * (ranks - 1)
    latency = measured["small_seconds"] / steps
    traffic = 2 * (ranks - 1) / ranks * measured["large_bytes"]
    link = traffic / max(measured["large_seconds"] - steps * latency, 1e-12)
    return latency, link


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="out/bench/cpu-hardware.json")
    parser.add_argument("--all-reduce-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.all_reduce_worker:
        return all_reduce_worker()
    rt = ctypes.CDLL(RUNTIME)
    latency, link = all_reduce_rates()
    cores = os.cpu_count()
    hardware = {"name": f"cpu-{cores}-cores", "cores": cores, "threads": cores,
                "flops_per_second_per_core": gemm_rate_on_threads(rt, 1),
                "flops_per_second": gemm_rate_on_threads(rt, cores),
                **bf16_rates(rt, cores),
                "bytes_per_second": memory_bytes_per_second(),
                "link_bytes_per_second": link, "latency_seconds": latency,
                "activation_bytes": 4}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(hardware, f, indent=2)
    print(json.dumps(hardware, indent=2))


if __name__ == "__main__":
    main()
