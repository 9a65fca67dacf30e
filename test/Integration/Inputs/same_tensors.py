"""Compares the tensors of two safetensors files, bit for bit, and prints
one metadata field of the second.

usage: same_tensors.py A B FIELD
"""
import json
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    header_len = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + header_len])
    body = data[8 + header_len:]
    metadata = header.pop("__metadata__", {})
    tensors = {name: body[t["data_offsets"][0]:t["data_offsets"][1]]
               for name, t in header.items()}
    return tensors, metadata


a, _ = read(sys.argv[1])
b, metadata = read(sys.argv[2])
differ = sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))
print("differ: " + (", ".join(differ) if differ else "none"))
print(f"{sys.argv[3]}: {metadata.get(sys.argv[3])}")
