#!/usr/bin/env python3
"""Writes llm.c token files of real text without downloading anything: the
bytes of the Python standard library's sources, one token per byte
(vocabulary 256). A small GPT-2 learns their structure quickly, so the
training loss visibly falls.

  make_text_tokens.py --out-dir DIR [--train-bytes N] [--val-bytes M]
writes DIR/train.bin and DIR/val.bin (disjoint files)."""
import argparse
import os
import sys
import sysconfig

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "gpt2_reference"))
import numpy as np  # noqa: E402
import tokens_io  # noqa: E402


def stdlib_sources():
    root = sysconfig.get_paths()["stdlib"]
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            yield os.path.join(root, name)


def collect(paths, count):
    data = bytearray()
    for path in paths:
        with open(path, "rb") as f:
            data += f.read()
        if len(data) >= count:
            break
    if len(data) < count:
        sys.exit(f"only {len(data)} bytes of standard-library source found")
    return np.frombuffer(bytes(data[:count]), dtype=np.uint8).astype(np.uint16)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--train-bytes", type=int, default=1 << 20)
    parser.add_argument("--val-bytes", type=int, default=1 << 16)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    paths = list(stdlib_sources())
    # Validation text comes from the last files, training text from the first.
    tokens_io.write_tokens(os.path.join(args.out_dir, "train.bin"),
                           collect(paths, args.train_bytes))
    tokens_io.write_tokens(os.path.join(args.out_dir, "val.bin"),
                           collect(reversed(paths), args.val_bytes))
    print(f"wrote {args.train_bytes} training and {args.val_bytes} validation "
          f"byte tokens to {args.out_dir}")


if __name__ == "__main__":
    main()
