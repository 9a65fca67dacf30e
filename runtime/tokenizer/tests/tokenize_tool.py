"""What the tokenizer tests share: megatron-tokenize (the binary named by
MEGATRON_TOKENIZE) and the llm.c token files it writes."""
import os
import struct
import subprocess

import pytest

# (magic, version) -> bytes per id: llm.c's 16-bit layout and the 32-bit one.
LAYOUTS = {(20240520, 1): 2, (20240801, 7): 4}


def tool():
    path = os.environ.get("MEGATRON_TOKENIZE")
    if not path:
        pytest.skip("MEGATRON_TOKENIZE (the megatron-tokenize binary) is not set")
    return path


def run(*args):
    return subprocess.run([tool(), *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=120)


def read_token_file(path, layout=None):
    """The ids of a token file, its header checked (and its (magic, version)
    against `layout` where given)."""
    data = open(path, "rb").read()
    magic, version, count = struct.unpack_from("<3i", data)
    if layout is not None:
        assert (magic, version) == layout
    width = LAYOUTS[(magic, version)]
    assert struct.unpack_from("<253i", data, 12) == (0,) * 253
    assert len(data) == 1024 + width * count
    return list(struct.unpack_from(f"<{count}{'H' if width == 2 else 'I'}",
                                   data, 1024))
