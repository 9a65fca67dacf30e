"""megatron-tokenize --tokenizer hf against Hugging Face's `tokenizers` (a
test-only reference), token for token, and --decode back to the very bytes:
the tokenizer.json files of Inputs/hf (make_hf_tokenizers.py), one with
Llama 3's pre-tokenisation and added tokens past the trained vocabulary,
one with GPT-2's; and a vocabulary past 65536 ids, written as llm.c's
32-bit token file.

    pytest test_hf_tokenizer.py          (MEGATRON_TOKENIZE=path/to/binary)
    python3 test_hf_tokenizer.py --megatron-tokenize BIN   (what ctest runs)

Run as a script: exit 0 = pass, 1 = fail, 77 = skipped (pytest or
tokenizers missing).
"""
import json
import os
import random
import struct
import sys

try:
    import pytest
except ImportError:
    print("SKIP: pytest is not available")
    sys.exit(77)
try:
    import tokenizers
except ImportError:
    if __name__ == "__main__":
        print("SKIP: tokenizers is not available")
        sys.exit(77)
    pytest.skip("tokenizers is not available", allow_module_level=True)

from tokenize_tool import read_token_file, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = {name: os.path.join(HERE, "Inputs", "hf", f"{name}.json")
         for name in ("llama3-style", "gpt2-style")}

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "It's 2024, and THEY'LL say we're done; I'M not, You've seen it.",
    "Numbers: 1234567 and 3.14159, 42nd street, 1,000,000 items. 12345678901",
    "def f(x):\r\n        return x ** 2  # squared\n\n\n    pass\t\tend",
    "Ünïcödé tëxt — ñandú, 東京, Καλημέρα, привет мир! Emoji 🙂🙂 and tabs",
    "  leading and trailing   \n\n  \n",
    "(word [x] {y} <z> 'quoted' \"double\" ...!!! ???\n",
    "<|begin_of_text|>Hello<|end_of_text|><|end_of_text|> x<|endoftext|>y",
    "<|begin_of_text|",
    "",
    " ",
    "\n",
    "a\u00a0b\u3000c\u2028d e\u0301 x\u00b2",
]


def encode_with_tool(tmp_path, tokenizer_json, text):
    source = tmp_path / "in.txt"
    source.write_bytes(text.encode("utf-8"))
    out = tmp_path / "out.bin"
    p = run("--tokenizer", "hf", "--tokenizer-json", tokenizer_json,
            str(source), "-o", str(out))
    assert p.returncode == 0, p.stderr.decode()
    ids = read_token_file(out)
    back = run("--tokenizer", "hf", "--tokenizer-json", tokenizer_json,
               "--decode", str(out))
    assert back.returncode == 0, back.stderr.decode()
    assert back.stdout == text.encode("utf-8")
    return ids


def random_text(rng, n):
    alphabet = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                " \t\n\r.,;:!?'\"()[]{}<>|-_=+*/\\#@$%^&~`" "éüñßøæ東京語мирΩ🙂\u0301\u00a0")
    return "".join(rng.choice(alphabet) for _ in range(n))


@pytest.mark.parametrize("name", sorted(FILES))
def test_texts_match_the_reference(tmp_path, name):
    reference = tokenizers.Tokenizer.from_file(FILES[name])
    rng = random.Random(7)
    texts = TEXTS + [random_text(rng, rng.randint(1, 300)) for _ in range(40)]
    for text in texts:
        want = reference.encode(text, add_special_tokens=False).ids
        assert encode_with_tool(tmp_path, FILES[name], text) == want, repr(text)


def test_one_long_text_matches(tmp_path):
    # The file's own training text many times over, cut and joined by the
    # added tokens: repeated pieces, the per-call cache of BPE results.
    name = "llama3-style"
    reference = tokenizers.Tokenizer.from_file(FILES[name])
    text = "<|begin_of_text|>".join(TEXTS * 50)
    want = reference.encode(text, add_special_tokens=False).ids
    assert encode_with_tool(tmp_path, FILES[name], text) == want


def test_a_vocabulary_past_65536_ids_writes_32_bit_tokens(tmp_path):
    # Llama 3's vocabulary has 128,256 ids: added tokens (as its reserved
    # special tokens) past 65536 make megatron-tokenize write llm.c's 32-bit
    # layout.
    wide = tokenizers.Tokenizer.from_file(FILES["llama3-style"])
    first = wide.get_vocab_size(with_added_tokens=True)
    wide.add_special_tokens([f"<|reserved_{i}|>" for i in range(first, 70002)])
    path = tmp_path / "wide.json"
    wide.save(str(path))
    text = "<|reserved_70001|> fox <|begin_of_text|><|reserved_500|>"
    want = wide.encode(text, add_special_tokens=False).ids
    assert want[0] == 70001
    source = tmp_path / "in.txt"
    source.write_text(text, encoding="utf-8")
    out = tmp_path / "out.bin"
    p = run("--tokenizer", "hf", "--tokenizer-json", str(path), str(source),
            "-o", str(out))
    assert p.returncode == 0, p.stderr.decode()
    assert "vocabulary 70002" in p.stdout.decode()
    assert struct.unpack_from("<2i", open(out, "rb").read()) == (20240801, 7)
    assert read_token_file(out) == want


def test_unsupported_files_are_refused_by_name(tmp_path):
    data = json.load(open(FILES["llama3-style"], encoding="utf-8"))
    data["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\s+"
    path = tmp_path / "other.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    source = tmp_path / "in.txt"
    source.write_text("x", encoding="utf-8")
    p = run("--tokenizer", "hf", "--tokenizer-json", str(path), str(source),
            "-o", str(tmp_path / "out.bin"))
    assert p.returncode == 1
    assert f"tokenizer.json {path}: pre_tokenizer" in p.stderr.decode()
    assert not (tmp_path / "out.bin").exists()


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron-tokenize", required=True)
    args = ap.parse_args()
    os.environ["MEGATRON_TOKENIZE"] = args.megatron_tokenize
    return pytest.main(["-q", "-p", "no:cacheprovider", __file__])


if __name__ == "__main__":
    sys.exit(main())
