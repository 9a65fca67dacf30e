#!/usr/bin/env python3
"""Writes a changed copy of a safetensors file, for the tests of bad inputs.

usage: edit_tensors.py IN OUT [--drop NAME] [--flatten NAME] [--add NAME]

--drop leaves a tensor out, --flatten makes it 1-d, --add adds a tensor of
4 zeros.
"""

import argparse

import numpy as np
from safetensors.numpy import load_file, save_file


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--drop", action="append", default=[])
    parser.add_argument("--flatten", action="append", default=[])
    parser.add_argument("--add", action="append", default=[])
    opts = parser.parse_args()
    tensors = load_file(opts.input)
    for name in opts.drop:
        del tensors[name]
    for name in opts.flatten:
        tensors[name] = tensors[name].reshape(-1)
    for name in opts.add:
        tensors[name] = np.zeros(4, np.float32)
    save_file(tensors, opts.output)


if __name__ == "__main__":
    main()
