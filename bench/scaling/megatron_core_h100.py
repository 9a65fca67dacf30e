#!/usr/bin/env python3
"""Megatron-Core's H100 throughput table (the Megatron-LM README's model
table: vocabulary 131072, sequence 4096, global batch 192, 48-way data
parallel, DP and TP communication overlapped) predicted by tp-predict on
the h100-sxm preset, for the rows without pipeline parallelism, which
tp-predict does not model: 1.7B to 32B, tensor parallel 1 to 8. Each row
sets the predicted TFLOP/s per GPU and MFU (over the preset's 989 TFLOP/s
dense bf16 peak) beside the published ones, with every collective blocking
and with tp and dp overlapped (overlap=tp,dp) as the published runs were.

  bench/scaling/megatron_core_h100.py [--build build] [--json FILE]
"""
import argparse
import json
import os
import tempfile

from predict import predict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PEAK_TFLOPS = 989.0  # h100-sxm, dense bf16
VOCAB, SEQ, BATCH, DP = 131072, 4096, 192, 48
# (model, heads, hidden, layers, tensor parallel, published TFLOP/s per GPU,
# published MFU %): the README's model table, rows with pipeline size 1.
ROWS = [("1.7B", 16, 2048, 24, 1, 408.8, 41),
        ("7.1B", 32, 4096, 30, 2, 465.9, 47),
        ("16B", 48, 6144, 32, 4, 489.1, 49),
        ("32B", 56, 7168, 48, 8, 459.6, 46)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for model, heads, hidden, layers, tp, tflops, mfu in ROWS:
            row = {"model": model, "tp": tp, "dp": DP, "gpus": tp * DP,
                   "published_tflops": tflops, "published_mfu": mfu}
            for key, overlap in (("blocking", ()), ("overlapped", ("tp", "dp"))):
                _, rate = predict(args.build, "h100-sxm", work, hidden=hidden,
                                  heads=heads, layers=layers, vocab=VOCAB,
                                  seq=SEQ, batch=BATCH, tp=tp, dp=DP,
                                  overlap=overlap)
                row[key + "_tflops"] = rate
            rows.append(row)
    print("Megatron-Core H100 table (PP=1 rows) predicted on h100-sxm")
    print(f"{'model':>6} {'tp':>3} {'dp':>3} {'GPUs':>5} {'published':>10} "
          f"{'MFU %':>6} {'blocking':>9} {'MFU %':>6} {'error':>6} "
          f"{'overlap':>8} {'MFU %':>6} {'error':>6}")
    for r in rows:
        line = (f"{r['model']:>6} {r['tp']:>3} {r['dp']:>3} {r['gpus']:>5} "
                f"{r['published_tflops']:>10.1f} {r['published_mfu']:>6}")
        for key in ("blocking", "overlapped"):
            rate = r[key + "_tflops"]
            error = 100 * (rate / r["published_tflops"] - 1)
            line += (f" {rate:>{9 if key == 'blocking' else 8}.1f}"
                     f" {100 * rate / PEAK_TFLOPS:>6.0f} {error:>+5.0f}%")
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
