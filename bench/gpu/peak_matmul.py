#!/usr/bin/env python3
"""The card's dense matmul peak as PyTorch reaches it: square products
C = A @ B (n x n x n, 2 n^3 FLOPs each) in bf16 on random data, timed with
CUDA events. For each size: a few untimed products (clocks up, cuBLAS picks
its kernel), then --repeats rounds of --iters back-to-back products between
two events; the rate of a round is iters * 2 n^3 / its time, and the peak is
the best round of any size. The MFU figures of the benchmark divide by this
measured rate, not by the datasheet's 989 TFLOP/s, which random data does
not reach.

  python3 bench/gpu/peak_matmul.py [--sizes 8192,16384] [--dtype bf16]
      [--warmup 3] [--iters 10] [--repeats 5] [--json-out FILE]

Prints one JSON line: {"peak_tflops", "best_size", "dtype", "device",
"device_name", "torch_version", "warmup", "iters", "repeats", "sizes":
{n: {"best_tflops", "median_tflops", "rounds_tflops"}}}.
On a machine without CUDA it runs on the CPU with torch's timer (for testing
the script; the number means nothing there).
"""
import argparse
import json
import statistics
import sys
import time

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
          "tf32": torch.float32}


def make_timer(device):
    """() -> stop(): seconds since the call, measured on the device's stream."""
    if device.type == "cuda":
        def start():
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()

            def stop():
                end.record()
                end.synchronize()
                return begin.elapsed_time(end) / 1e3
            return stop
    else:
        def start():
            t0 = time.perf_counter()
            return lambda: time.perf_counter() - t0
    return start


def measure_size(n, dtype, device, args):
    """TFLOP/s of each timed round for n x n x n products."""
    gen = torch.Generator(device=device).manual_seed(n)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    c = torch.empty(n, n, device=device, dtype=dtype)
    for _ in range(args.warmup):
        torch.matmul(a, b, out=c)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    timer = make_timer(device)
    rounds = []
    for _ in range(args.repeats):
        stop = timer()
        for _ in range(args.iters):
            torch.matmul(a, b, out=c)
        seconds = stop()
        rounds.append(args.iters * 2 * n**3 / seconds / 1e12)
    del a, b, c
    return rounds


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="8192,16384", help="comma-separated n")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="auto")
    p.add_argument("--json-out")
    args = p.parse_args()
    device = torch.device(args.device if args.device != "auto"
                          else "cuda" if torch.cuda.is_available() else "cpu")
    # tf32 is fp32 storage with TF32 tensor-core products; fp32 means IEEE fp32.
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    sizes = {}
    for n in (int(s) for s in args.sizes.split(",") if s):
        rounds = measure_size(n, DTYPES[args.dtype], device, args)
        sizes[str(n)] = {"best_tflops": max(rounds), "median_tflops": statistics.median(rounds),
                         "rounds_tflops": rounds}
        print(f"n={n} {args.dtype}: best {max(rounds):.1f} TFLOP/s, "
              f"median {statistics.median(rounds):.1f}", file=sys.stderr, flush=True)
    best_n = max(sizes, key=lambda k: sizes[k]["best_tflops"])
    out = {"peak_tflops": sizes[best_n]["best_tflops"], "best_size": int(best_n),
           "dtype": args.dtype, "device": str(device),
           "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "torch_version": torch.__version__, "warmup": args.warmup, "iters": args.iters,
           "repeats": args.repeats, "sizes": sizes}
    line = json.dumps(out)
    if args.json_out:
        with open(args.json_out, "w") as f:
            f.write(line + "\n")
    print(line, flush=True)


if __name__ == "__main__":
    main()
