#!/usr/bin/env python3
"""Our runtime's kernels beside PyTorch's on the same tensors: the largest
pieces of a GPT-2 training step (causal attention forward and backward, the
GEMMs with and without the bias epilogue, layer norm), each checked against
PyTorch and timed, in bf16 at the shapes of the timed model. Where the step
is slower than PyTorch's, this says which piece is.

  python3 bench/gpu/kernels.py --lib libmegatron_rt_cuda.so [--lib-path DIRS]
      [--device cuda] [--preset 124M --batch 16 --seq 1024 --vocab-rows V]
      [--iters 20] --out kernels.json

--lib is the runtime to load: libmegatron_rt_cuda.so on a GPU, or the CPU
runtime with --device cpu (a smoke test of this script). --lib-path lists
folders to load the runtime's dependencies from when PyTorch has not loaded
them already (the bundle's MPI stub, cuBLASLt, NCCL).

Time per call: the median over --iters timed calls (after 3 warm-up calls),
each between device synchronisations, so it includes one launch latency.
Difference: max |ours - torch| / max |torch| per output.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import mfu

# Dependencies of libmegatron_rt_cuda.so that PyTorch may not have loaded.
DEPENDENCIES = ("libmpi.so.40", "libcublasLt.so.13", "libnccl.so.2")

I32, I64, F32 = ctypes.c_int, ctypes.c_int64, ctypes.c_float


def loaded_libraries():
    with open("/proc/self/maps") as f:
        return {os.path.basename(line.split()[-1]) for line in f if "/" in line}


def load_runtime(path, search_dirs):
    """PyTorch's own CUDA libraries stay the process's; what it lacks comes
    from search_dirs, loaded globally before the runtime that needs it."""
    loaded = loaded_libraries()
    for name in DEPENDENCIES:
        if name in loaded:
            continue
        for folder in search_dirs:
            candidate = os.path.join(folder, name)
            if os.path.exists(candidate):
                ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL)
                break
    return ctypes.CDLL(path)


def pointer(tensor):
    return ctypes.c_void_p(tensor.data_ptr())


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def time_call(fn, device, iters):
    for _ in range(3):
        fn()
    synchronize(device)
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def difference(ours, reference):
    """max |ours - reference| / max |reference| (absolute for an all-zero
    reference)."""
    ours, reference = ours.float(), reference.float()
    scale = max(reference.abs().max().item(), 1e-30)
    return (ours - reference).abs().max().item() / scale


class Bench:
    def __init__(self, rt, device, iters):
        self.rt, self.device, self.iters = rt, device, iters
        self.rows = []

    def case(self, name, shape, flops, ours, theirs, outputs, rtol):
        """ours() and theirs() each compute `outputs` (pairs of tensors the
        calls write: ours, PyTorch's); both are timed."""
        ours()
        theirs()
        synchronize(self.device)
        diffs = [difference(o(), t()) for o, t in outputs]
        ours_ms = time_call(ours, self.device, self.iters)
        torch_ms = time_call(theirs, self.device, self.iters)
        row = {"kernel": name, "shape": shape, "ours_ms": ours_ms, "torch_ms": torch_ms,
               "ours_over_torch_time": ours_ms / torch_ms,
               "ours_tflops": flops / ours_ms / 1e9 if flops else None,
               "torch_tflops": flops / torch_ms / 1e9 if flops else None,
               "max_rel_diff": max(diffs), "rtol": rtol, "ok": max(diffs) <= rtol}
        self.rows.append(row)
        print(f"{name:28s} {shape:28s} ours {ours_ms:8.3f} ms  torch {torch_ms:8.3f} ms  "
              f"ours/torch {row['ours_over_torch_time']:5.2f}  diff {row['max_rel_diff']:.2e} "
              f"{'ok' if row['ok'] else 'MISMATCH'}")


def attention_cases(bench, args):
    rt, dev = bench.rt, bench.device
    B, T, H, C = args.batch, args.seq, args.heads, args.embd
    D = C // H
    qkv = (torch.randn(B, T, 3 * C, device=dev) * 0.5).to(torch.bfloat16)
    dout = torch.randn(B, T, C, device=dev).to(torch.bfloat16)
    out = torch.empty(B, T, C, device=dev, dtype=torch.bfloat16)
    lse = torch.empty(B, H, T, device=dev)
    dqkv = torch.empty_like(qkv)
    sizes = (I64(B), I64(T), I64(H), I64(D))

    def heads(x):  # [B, T, 3C] -> q, k, v as [B, H, T, D]
        return x.view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)

    def ours_forward():
        rt.mrt_attention_fwd_bf16(pointer(qkv), pointer(out), pointer(lse), *sizes)

    def ours_both():
        ours_forward()
        rt.mrt_attention_bwd_bf16(pointer(qkv), pointer(out), pointer(dout), pointer(lse),
                                  pointer(dqkv), *sizes)

    result = {}

    def torch_forward():
        q, k, v = heads(qkv)
        result["out"] = F.scaled_dot_product_attention(q, k, v, is_causal=True)

    leaf = qkv.detach().clone().requires_grad_(True)

    def torch_both():
        leaf.grad = None
        q, k, v = heads(leaf)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y.transpose(1, 2).reshape(B, T, C).backward(dout)
        result["out"] = y

    ours_out = lambda: out  # noqa: E731
    torch_out = lambda: result["out"].transpose(1, 2).reshape(B, T, C)  # noqa: E731
    shape = f"B={B} T={T} H={H} D={D}"
    # llm.c's count: 2 products of 2*T*T*D per head, full (non-causal) T.
    flops = 2 * 2 * B * H * T * T * D
    bench.case("attention fwd", shape, flops, ours_forward, torch_forward,
               [(ours_out, torch_out)], args.rtol)
    # The backward's five products (S recomputed, dV, dP, dQ, dK) and the
    # forward's two.
    bench.case("attention fwd+bwd", shape, 3.5 * flops, ours_both, torch_both,
               [(ours_out, torch_out), (lambda: dqkv, lambda: leaf.grad)], args.rtol)


def gemm_cases(bench, args):
    rt, dev = bench.rt, bench.device
    rows, C, V = args.batch * args.seq, args.embd, args.vocab
    # (name, K, N, epilogue, transposed weight): the step's forward GEMMs.
    for name, K, N, epilogue, transposed in (
            ("gemm+bias qkv", C, 3 * C, "bias", False),
            ("gemm attn proj", C, C, None, False),
            ("gemm+bias+gelu mlp fc", C, 4 * C, "gelu", False),
            ("gemm mlp proj", 4 * C, C, None, False),
            ("gemm lm head (w^T)", C, V, None, True)):
        a = (torch.randn(rows, K, device=dev) / K ** 0.5).to(torch.bfloat16)
        w = torch.randn(N, K, device=dev).to(torch.bfloat16) if transposed else \
            torch.randn(K, N, device=dev).to(torch.bfloat16)
        bias = torch.randn(N, device=dev).to(torch.bfloat16)
        c = torch.empty(rows, N, device=dev, dtype=torch.bfloat16)
        g = torch.empty_like(c)
        result = {}
        ld_w = K if transposed else N
        common = (I32(0), I32(int(transposed)), I64(rows), I64(N), I64(K))

        def ours(a=a, w=w, bias=bias, c=c, g=g, common=common, ld_w=ld_w, K=K, N=N,
                 epilogue=epilogue):
            operands = (pointer(a), I64(K), pointer(w), I64(ld_w))
            if epilogue == "gelu":
                rt.mrt_gemm_bias_gelu_bf16(*common, *operands, pointer(bias), pointer(c),
                                           pointer(g), I64(N))
            elif epilogue == "bias":
                rt.mrt_gemm_bias_bf16(*common, *operands, pointer(bias), pointer(c), I64(N))
            else:
                rt.mrt_gemm_bf16(*common, F32(1.0), *operands, F32(0.0), pointer(c), I64(N))

        def theirs(a=a, w=w, bias=bias, result=result, epilogue=epilogue,
                   transposed=transposed):
            weight = w.t() if transposed else w
            result["c"] = torch.addmm(bias, a, weight) if epilogue else a @ weight
            if epilogue == "gelu":
                result["g"] = F.gelu(result["c"], approximate="tanh")

        outputs = [(lambda c=c: c, lambda result=result: result["c"])]
        if epilogue == "gelu":
            outputs.append((lambda g=g: g, lambda result=result: result["g"]))
        bench.case(name, f"{rows}x{K} . {K}x{N}", 2 * rows * K * N, ours, theirs, outputs,
                   args.gemm_rtol)


def layernorm_case(bench, args):
    rt, dev = bench.rt, bench.device
    rows, C = args.batch * args.seq, args.embd
    x = torch.randn(rows, C, device=dev).to(torch.bfloat16)
    w = (1 + 0.1 * torch.randn(C, device=dev)).to(torch.bfloat16)
    b = (0.1 * torch.randn(C, device=dev)).to(torch.bfloat16)
    y = torch.empty_like(x)
    mean = torch.empty(rows, device=dev)
    rstd = torch.empty(rows, device=dev)
    result = {}

    def ours():
        rt.mrt_layernorm_fwd_bf16(pointer(x), pointer(w), pointer(b), pointer(y), pointer(mean),
                                  pointer(rstd), I64(rows), I64(C), F32(1e-5))

    def theirs():
        result["y"] = F.layer_norm(x, (C,), w, b, 1e-5)

    bench.case("layer norm fwd", f"{rows}x{C}", None, ours, theirs,
               [(lambda: y, lambda: result["y"])], args.rtol)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", required=True)
    p.add_argument("--lib-path", default="")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--preset", default="124M", choices=list(mfu.PRESETS))
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--vocab-rows", type=int, help="rows of wte (default: the preset's vocab)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--rtol", type=float, default=2e-2,
                   help="attention and layer norm: bf16 outputs of two implementations")
    p.add_argument("--gemm-rtol", type=float, default=1e-2)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    _, args.heads, args.embd, vocab, _ = mfu.preset(args.preset)
    args.vocab = args.vocab_rows or vocab
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("kernels.py: PyTorch sees no GPU (use --device cpu for a smoke test)")
    torch.manual_seed(0)
    if args.device == "cuda":
        # cuBLASLt and NCCL come from PyTorch's wheels once it has used them.
        torch.ones(8, 8, device="cuda") @ torch.ones(8, 8, device="cuda")
    rt = load_runtime(args.lib, [d for d in args.lib_path.split(":") if d])
    rt.mrt_context_create.restype = ctypes.c_void_p
    error = ctypes.create_string_buffer(512)
    ctx = rt.mrt_context_create(I64(1), error, ctypes.c_size_t(len(error)))
    if not ctx:
        sys.exit(f"kernels.py: mrt_context_create failed: {error.value.decode()}")
    bench = Bench(rt, args.device, args.iters)
    attention_cases(bench, args)
    gemm_cases(bench, args)
    layernorm_case(bench, args)
    with open(args.out, "w") as f:
        json.dump({"device": args.device, "torch": torch.__version__,
                   "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
                   "iters": args.iters, "kernels": bench.rows}, f, indent=1)
    # The runtime's context stays: destroying it finalises MPI, which the
    # interpreter's exit would then meet again in the stub.
    return 0 if all(r["ok"] for r in bench.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
