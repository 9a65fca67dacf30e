"""megatron-tokenize --tokenizer gpt2 against GPT-2's encoder written here
from the published algorithm (OpenAI's gpt-2 src/encoder.py:
bytes_to_unicode, the pre-tokenisation regex with the `regex` package, the
BPE loop), token for token, and --decode back to the very bytes.

    pytest test_gpt2_tokenizer.py          (MEGATRON_TOKENIZE=path/to/binary)
    python3 test_gpt2_tokenizer.py --megatron-tokenize BIN   (what ctest runs)

The vocabularies: the hand-made one of Inputs/; merges trained here on the
text, in their order and shuffled (ranks, not the order in which pairs
arise, decide); one where each piece is a token and a merge joins each two
neighbouring pieces (a piece cut otherwise shows); some 20000 merges on one
long piece (BPE's complexity); and GPT-2's own where MEGATRON_GPT2_VOCAB and
MEGATRON_GPT2_MERGES name its vocab.json and merges.txt.
Run as a script: exit 0 = pass, 1 = fail, 77 = skipped (pytest or regex
missing).
"""
import collections
import inspect
import json
import os
import random
import struct
import subprocess
import sys
import textwrap

try:
    import pytest
except ImportError:
    print("SKIP: pytest is not available")
    sys.exit(77)
try:
    import regex
except ImportError:
    if __name__ == "__main__":
        print("SKIP: regex is not available")
        sys.exit(77)
    pytest.skip("regex is not available", allow_module_level=True)

from tokenize_tool import read_token_file, run, tool  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "Inputs")
PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


# ------------------------------------------------------- the reference

def bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(2 ** 8):
        if b not in bs:
            bs.append(b)
            cs.append(2 ** 8 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_ENCODER = bytes_to_unicode()


def get_pairs(word):
    return set(zip(word, word[1:]))


def read_merges(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    if lines and lines[0].startswith("#version"):
        lines = lines[1:]
    if lines and lines[-1] == "":
        lines = lines[:-1]
    return [tuple(line.split(" ")) for line in lines]


class Encoder:
    """encoder.py's Encoder; text is bytes, decoded with surrogateescape so
    that invalid UTF-8 takes part as it does in megatron-tokenize."""

    def __init__(self, vocab_path, merges_path):
        self.encoder = json.load(open(vocab_path, encoding="utf-8"))
        merges = read_merges(merges_path)
        self.bpe_ranks = dict(zip(merges, range(len(merges))))
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                except ValueError:
                    new_word.extend(word[i:])
                    break
                new_word.extend(word[i:j])
                i = j
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        word = " ".join(word)
        self.cache[token] = word
        return word

    def encode(self, data):
        ids = []
        for token in regex.findall(PATTERN, data.decode("utf-8", "surrogateescape")):
            token = "".join(BYTE_ENCODER[b] for b in token.encode("utf-8", "surrogateescape"))
            ids.extend(self.encoder[t] for t in self.bpe(token).split(" "))
        return ids


# ------------------------------------------------------- the text

HAND_TEXT = textwrap.dedent("""\
    It's the cat's hat; they're here, we've won, I'm sure you'll see he'd go.
    IT'S LOUD. 'Quoted' "double" ''s  --  don't!!! Won't?? rock'n'roll
      Two leading spaces, then    four.   Trailing spaces\x20\x20\x20
    \ttabs\t\tand\r\nwindows lines\r\n\n\n\nblank lines above
    Numbers: 0 7 42 3.14159 1,000,000 2024-05-20 0x1F 1e-9 ½ ² Ⅻ ٣٤ ¹²³
    Math: E=mc², H₂O, 1½ cups, chapter Ⅻ., x²+y², ǅemal ʰi, ٣٤%
    Accents: café naïve façade Ærøskøbing straße Ωmega résumé e\u0301 (combining)
    Scripts: Русский текст, Ελληνικά, עברית, العربية, हिन्दी, 日本語のテキスト, 한국어, ไทย
    Emoji: 😀 😀😀 👍🏽 👨‍👩‍👧 🇫🇷 ✨✨ ❤️
    Spaces: a \u00a0b c \u2003d e \u3000f g \u2028h i \u0085j k \x0bl m \x0cn o \u2007p q \u202fr
    Separators, not spaces: s \x1c\x1dt u \x1e\x1fv
    Punctuation: ... --- ~~~ @#$%^&*() [] {} <|endoftext|> «guillemets» “curly” — – …
    code:    for (int i = 0; i < n; ++i) { x += a[i] * b[i]; }  // done
    ========================================================================
    """).encode("utf-8")

INVALID_UTF8 = (b"bad bytes: \xff\xfe \xc0\xaf overlong, \xed\xa0\x80 surrogate, "
                b"\xe2\x82 cut short, \x80 alone!\xff? x\xe0\x81\x81y overlong A\n")


def corpus():
    """HAND_TEXT, invalid UTF-8 and some of Python's own sources."""
    parts = [HAND_TEXT, INVALID_UTF8]
    for name in ("textwrap", "string", "json.decoder", "calendar"):
        module = __import__(name, fromlist=["_"])
        with open(inspect.getsourcefile(module), "rb") as f:
            parts.append(f.read())
    return b"".join(parts)


# ------------------------------------------------------- vocabularies

def trained_merges(words, count):
    """Up to `count` BPE merges learned greedily on words (byte strings)."""
    words = collections.Counter(tuple(BYTE_ENCODER[b] for b in word) for word in words)
    merges = []
    for _ in range(count):
        pairs = collections.Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        merged = collections.Counter()
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if word[i:i + 2] == best:
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return merges


def pre_tokens(data):
    return [piece.encode("utf-8", "surrogateescape")
            for piece in regex.findall(PATTERN, data.decode("utf-8", "surrogateescape"))]


def write_vocabulary(directory, merges):
    """vocab.json (the 256 byte symbols, then every merge's result) and
    merges.txt in `directory`; returns their paths."""
    vocab = {symbol: i for i, symbol in enumerate(BYTE_ENCODER.values())}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab_path = os.path.join(directory, "vocab.json")
    merges_path = os.path.join(directory, "merges.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(merges_path, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    return vocab_path, merges_path


# ------------------------------------------------------- the tool

def check_against_reference(tmp_path, data, vocab_path, merges_path, reference=True):
    """Encodes data with megatron-tokenize, compares the tokens with the
    reference's (unless reference=False) and decodes them back; returns
    them."""
    text_path, tokens_path = tmp_path / "text.txt", tmp_path / "tokens.bin"
    text_path.write_bytes(data)
    files = ["--tokenizer", "gpt2", "--vocab", vocab_path, "--merges", merges_path]
    p = run(*files, str(text_path), "-o", str(tokens_path))
    assert p.returncode == 0, p.stderr.decode()
    got = read_token_file(tokens_path, layout=(20240520, 1))
    if reference:
        want = Encoder(vocab_path, merges_path).encode(data)
        first_difference = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w),
                                min(len(got), len(want)))
        assert got == want, f"tokens differ from position {first_difference}"
    p = run(*files, "--decode", str(tokens_path))
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout == data
    return got


# ------------------------------------------------------- tests

def test_hand_made_vocabulary(tmp_path):
    tokens = check_against_reference(tmp_path, corpus(), os.path.join(INPUTS, "vocab.json"),
                                     os.path.join(INPUTS, "merges.txt"))
    assert max(tokens) >= 256  # merges took part


@pytest.mark.parametrize("order", ["trained", "shuffled"])
def test_trained_vocabulary(tmp_path, order):
    data = corpus()
    merges = trained_merges(pre_tokens(HAND_TEXT + INVALID_UTF8 + data[-20000:]), 300)
    if order == "shuffled":
        random.Random(20240520).shuffle(merges)
    vocab_path, merges_path = write_vocabulary(str(tmp_path), merges)
    tokens = check_against_reference(tmp_path, data, vocab_path, merges_path)
    assert len(tokens) < len(data) * (0.6 if order == "trained" else 0.95)


def test_pieces_decide(tmp_path):
    """Merges learned until each piece of the text is one token (nearly: a
    merge may meet a pair it was not learned on), then one joining each two
    neighbouring pieces, which the reference never makes: a piece split or
    joined otherwise shows in the tokens."""
    data = HAND_TEXT + INVALID_UTF8
    pieces = pre_tokens(data)
    merges = trained_merges(pieces, len(data))
    symbols = lambda piece: "".join(BYTE_ENCODER[b] for b in piece)
    for pair in zip(map(symbols, pieces), map(symbols, pieces[1:])):
        if pair not in merges:
            merges.append(pair)
    vocab_path, merges_path = write_vocabulary(str(tmp_path), merges)
    tokens = check_against_reference(tmp_path, data, vocab_path, merges_path)
    assert len(tokens) < 1.05 * len(pieces)


def test_gpt2_vocabulary(tmp_path):
    vocab_path = os.environ.get("MEGATRON_GPT2_VOCAB")
    merges_path = os.environ.get("MEGATRON_GPT2_MERGES")
    if not (vocab_path and merges_path):
        pytest.skip("MEGATRON_GPT2_VOCAB and MEGATRON_GPT2_MERGES are not set")
    check_against_reference(tmp_path, corpus(), vocab_path, merges_path)


def test_long_piece(tmp_path):
    """One 500000-letter piece that up to 20880 merges apply to, one round
    each: under a second here (O(n log n)), where rescanning the piece every
    round as the reference does takes up to 1e10 steps (a minute in C++;
    ctest's timeout ends such a run). The reference checks the first 3000
    letters."""
    letters = "abcdefghijkl"
    pairs = [a + b for a in letters for b in letters]
    merges = [tuple(p) for p in pairs] + [(p, q) for p in pairs for q in pairs]
    vocab_path, merges_path = write_vocabulary(str(tmp_path), merges)
    rng = random.Random(7)
    data = "".join(rng.choice(letters) for _ in range(500000)).encode()
    check_against_reference(tmp_path, data[:3000], vocab_path, merges_path)
    tokens = check_against_reference(tmp_path, data, vocab_path, merges_path,
                                     reference=False)
    assert len(tokens) < len(data) / 2


@pytest.mark.parametrize("args, status, message", [
    (["--frobnicate"], 2, "unknown option --frobnicate"),
    (["a.txt", "b.txt", "-o", "x.bin"], 2, "more than one input file: a.txt and b.txt"),
    ([], 2, "no input file"),
    (["a.txt"], 2, "no output file"),
    (["--decode", "t.bin", "a.txt"], 2, "--decode prints text"),
    (["--tokenizer"], 2, "--tokenizer needs a value"),
    (["--tokenizer", "gpt2", "a.txt", "-o", "x.bin"], 2, "needs both a vocab.json and a merges.txt"),
    (["--tokenizer", "words", "a.txt", "-o", "x.bin"], 2, "unknown tokenizer \"words\""),
    (["missing.txt", "-o", "x.bin"], 1, "missing.txt"),
    (["--decode", "missing.bin"], 1, "missing.bin"),
])
def test_errors(tmp_path, args, status, message):
    """Every error of the command line (exit 2) and of its files (exit 1) is
    one line naming what is wrong; nothing is written."""
    p = subprocess.run([tool(), *args], cwd=tmp_path, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == status, p.stderr.decode()
    assert p.stderr.decode().startswith("megatron-tokenize: error: ")
    assert message in p.stderr.decode()
    assert not (tmp_path / "x.bin").exists()


def test_output_onto_its_input_is_refused(tmp_path):
    """-o naming the input (by any path) would replace the text."""
    text = tmp_path / "a.txt"
    text.write_bytes(b"some text")
    p = subprocess.run([tool(), "a.txt", "-o", "./a.txt"], cwd=tmp_path,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    assert p.returncode == 2, p.stderr.decode()
    assert "-o ./a.txt is the input file" in p.stderr.decode()
    assert text.read_bytes() == b"some text"


def test_decode_refuses_an_id_outside_the_vocabulary(tmp_path):
    tokens = tmp_path / "t.bin"
    tokens.write_bytes(struct.pack("<3i", 20240520, 1, 2) + bytes(1012) +
                       struct.pack("<2H", 65, 300))
    p = run("--decode", str(tokens))
    assert p.returncode == 1
    assert "300" in p.stderr.decode() and p.stdout == b""


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron-tokenize", required=True)
    args = ap.parse_args()
    os.environ["MEGATRON_TOKENIZE"] = args.megatron_tokenize
    return pytest.main(["-q", "-p", "no:cacheprovider", __file__])


if __name__ == "__main__":
    sys.exit(main())
