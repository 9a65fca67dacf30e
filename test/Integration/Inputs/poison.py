"""Copies a safetensors file with one element of one F32 tensor set to NaN.

usage: poison.py IN OUT TENSOR INDEX
"""
import json
import struct
import sys

source, target, tensor, index = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
data = open(source, "rb").read()
header_len = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + header_len])
at = 8 + header_len + header[tensor]["data_offsets"][0] + 4 * index
open(target, "wb").write(data[:at] + struct.pack("<f", float("nan")) + data[at + 4:])
