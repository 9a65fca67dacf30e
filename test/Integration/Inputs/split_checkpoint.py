"""Splits a safetensors checkpoint as Hugging Face publishes large ones:
FOLDER/model-0000k-of-0000n.safetensors and model.safetensors.index.json
({"weight_map": {tensor: file}}).

    split_checkpoint.py MODEL.safetensors FOLDER --shards N [--misplace NAME]

--misplace NAME names, in the index, the wrong file for tensor NAME (a
broken index, for the error test).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "utils", "gpt2_reference"))
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("folder")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--misplace", default=None)
    a = ap.parse_args()
    tensors = read_safetensors(a.model)
    names = list(tensors)
    os.makedirs(a.folder, exist_ok=True)
    files = [f"model-{k + 1:05d}-of-{a.shards:05d}.safetensors"
             for k in range(a.shards)]
    weight_map = {}
    for k, file in enumerate(files):
        part = names[k * len(names) // a.shards:(k + 1) * len(names) // a.shards]
        write_safetensors(os.path.join(a.folder, file),
                          {n: tensors[n] for n in part})
        weight_map.update({n: file for n in part})
    if a.misplace:
        weight_map[a.misplace] = next(f for f in files
                                      if f != weight_map[a.misplace])
    with open(os.path.join(a.folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


if __name__ == "__main__":
    main()
