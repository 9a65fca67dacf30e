#!/usr/bin/env python3
"""Megatron-LM's weak scaling (Shoeybi et al. 2019, Figure 5) predicted by
tp-predict: the four GPT-2 configurations of the paper's Table 1 (1.2B on 1
GPU to 8.3B on 8-way model parallelism, batch 8 per model-parallel group,
sequence 1024, vocabulary 50257 padded as Megatron pads it), model parallel
alone and with 64-way data parallelism (64 to 512 GPUs), on the DGX-2H
cluster of bench/scaling/dgx2h.json. Efficiency is each layout's predicted
TFLOP/s per GPU over the one-GPU baseline's, as the paper defines it; the
table sets it beside the paper's figures (from its text and Figure 5).
The data-parallel gradient reduction runs after the backward pass, as the
paper's implementation ran it; --overlap runs it under the rest of the
backward pass (tp-predict's overlap=dp), as later Megatron-LM does. Each
layer's forward pass is recomputed before its backward pass (tp-predict's
recompute), as the paper's runs checkpointed activations;
--keep-activations predicts the step that keeps them instead.

  bench/scaling/megatron_weak_scaling.py [--build build] [--hardware FILE]
      [--calibrate] [--overlap] [--keep-activations] [--json FILE]

--calibrate prints the baseline's predicted TFLOP/s per GPU without
recomputation, which the hardware file's flops_per_second was chosen to
bring to the paper's 39: there the FLOPs the GPU runs are the model's, and
the fit is the rate the GPU runs them at. (The paper does not say whether
its 39 counts the recomputed forward; Megatron-LM's later paper, Narayanan
et al. 2021, counts it, and this fit follows that.) Efficiency is a ratio of
model FLOP rates, so how the rate column counts does not move it.
"""
import argparse
import json
import os
import tempfile

from predict import predict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# (parameters, hidden, heads, layers, model-parallel size): Table 1.
CONFIGS = [("1.2B", 1536, 16, 40, 1), ("2.5B", 1920, 20, 54, 2),
           ("4.2B", 2304, 24, 64, 4), ("8.3B", 3072, 32, 72, 8)]
# Weak-scaling efficiency read from the paper: model+data parallel at 64,
# 128, 256 and 512 GPUs (text of section 5.1); model parallel alone at 8
# GPUs (77%, text); the others off Figure 5 are not quoted.
PAPER_MP_DP = {1: 96, 2: 83, 4: 79, 8: 74}
PAPER_MP = {1: 100, 8: 77}
BATCH_PER_GROUP, SEQ, VOCAB, DP = 8, 1024, 50257, 64

def predict_layout(build, hardware, hidden, heads, layers, tp, dp, work,
                   overlap=False, recompute=True):
    """(step seconds, model TFLOP/s per GPU) of one layout of the paper's
    runs."""
    return predict(build, hardware, work, hidden=hidden, heads=heads,
                   layers=layers, vocab=VOCAB, seq=SEQ,
                   batch=BATCH_PER_GROUP * dp, tp=tp, dp=dp,
                   overlap=("dp",) if overlap else (), recompute=recompute)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--hardware", default=os.path.join(HERE, "dgx2h.json"))
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--overlap", action="store_true",
                        help="the dp reduction under the backward pass")
    parser.add_argument("--keep-activations", action="store_true",
                        help="no recomputation: every activation kept")
    parser.add_argument("--json")
    args = parser.parse_args()
    recompute = not args.keep_activations
    with tempfile.TemporaryDirectory() as work:
        if args.calibrate:
            _, rate = predict_layout(args.build, args.hardware,
                                     *CONFIGS[0][1:4], 1, 1, work,
                                     recompute=False)
            print(f"baseline (1.2B, 1 GPU, no recomputation): {rate:.1f} "
                  "TFLOP/s per GPU predicted; the paper measured 39")
            return
        _, base = predict_layout(args.build, args.hardware,
                                 *CONFIGS[0][1:4], 1, 1, work,
                                 recompute=recompute)
        rows = []
        for name, hidden, heads, layers, mp in CONFIGS:
            for dp in (1, DP):
                seconds, rate = predict_layout(
                    args.build, args.hardware, hidden, heads, layers, mp, dp,
                    work, overlap=args.overlap, recompute=recompute)
                paper = (PAPER_MP_DP if dp > 1 else PAPER_MP).get(mp)
                rows.append({"model": name, "tp": mp, "dp": dp,
                             "gpus": mp * dp, "step_s": seconds,
                             "tflops_per_gpu": rate,
                             "efficiency": 100 * rate / base,
                             "paper": paper})
    print(f"weak scaling on {os.path.basename(args.hardware)} "
          f"(baseline {base:.1f} model TFLOP/s per GPU; dp reduction "
          f"{'overlapped' if args.overlap else 'after the backward pass'}; "
          f"{'layers recomputed' if recompute else 'activations kept'})")
    print(f"{'model':>6} {'tp':>3} {'dp':>3} {'GPUs':>5} {'step s':>8} "
          f"{'TFLOP/s':>8} {'eff %':>6} {'paper %':>8} {'diff':>5}")
    for r in rows:
        paper = "-" if r["paper"] is None else str(r["paper"])
        diff = ("-" if r["paper"] is None
                else f"{r['efficiency'] - r['paper']:+.1f}")
        print(f"{r['model']:>6} {r['tp']:>3} {r['dp']:>3} {r['gpus']:>5} "
              f"{r['step_s']:>8.3f} {r['tflops_per_gpu']:>8.1f} "
              f"{r['efficiency']:>6.1f} {paper:>8} {diff:>5}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"baseline_tflops_per_gpu": base, "rows": rows}, f,
                      indent=2)


if __name__ == "__main__":
    main()
