"""Writes the small tokenizer.json files of Inputs/hf with Hugging Face's
`tokenizers` (a test-only dependency): byte-level BPE trained on a few
paragraphs, one with Llama 3's pre-tokenisation (a Split on its regex,
ignore_merges) and special tokens past the trained vocabulary, one with
GPT-2's (ByteLevel with its own regex). The files are committed; this
script is how they were made.

    python3 make_hf_tokenizers.py Inputs/hf
"""
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

# Llama 3's (and tiktoken cl100k's) pre-tokenisation pattern.
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                  r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
                  r"\s+(?!\S)|\s+")

TEXT = """The quick brown fox jumps over the lazy dog. It's 2024, and they'll
say we're done; I'm not, you've seen it, he'd agree. Numbers: 1234567 and
3.14159, 42nd street, 1,000,000 items.
    Indented code: def f(x):\r\n        return x ** 2  # squared
Ünïcödé tëxt — ñandú, 東京, Καλημέρα, привет мир! Emoji 🙂🙂 and tabs\t\tend.
"""


def train(pre_tokenizer, ignore_merges, specials):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TEXT] * 4, trainer)
    tok.add_special_tokens(specials)
    return tok


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    llama3 = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated",
                             invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    train(llama3, True, ["<|begin_of_text|>", "<|end_of_text|>"]).save(
        os.path.join(out, "llama3-style.json"))
    gpt2 = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    train(gpt2, False, ["<|endoftext|>"]).save(
        os.path.join(out, "gpt2-style.json"))


if __name__ == "__main__":
    main()
