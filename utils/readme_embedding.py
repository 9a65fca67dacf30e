#!/usr/bin/env python3
"""The README's "Embedding" section, for scripts/check-install.sh.

  readme_embedding.py README.md --commands
      prints the section's shell block, to run as written;
  readme_embedding.py README.md --check-snippets examples
      fails unless every C and C++ block of the section is a verbatim
      excerpt of a file under examples/, which CI builds and runs.
"""
import argparse
import pathlib
import re
import sys

SECTION = "## Embedding"


def blocks(readme):
    text = pathlib.Path(readme).read_text()
    start = text.find("\n" + SECTION + "\n")
    if start < 0:
        sys.exit(f"{readme}: no '{SECTION}' section")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end >= 0 else len(text)]
    return re.findall(r"^```(\w+)\n(.*?)^```$", section, re.M | re.S)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("readme")
    parser.add_argument("--commands", action="store_true")
    parser.add_argument("--check-snippets", metavar="DIR")
    args = parser.parse_args()
    found = blocks(args.readme)
    if args.commands:
        shell = [body for lang, body in found if lang == "sh"]
        if len(shell) != 1:
            sys.exit(f"{args.readme}: '{SECTION}' needs one sh block, has {len(shell)}")
        print(shell[0], end="")
    if args.check_snippets:
        sources = [p.read_text() for p in pathlib.Path(args.check_snippets).rglob("*")
                   if p.suffix in (".c", ".cpp", ".txt")]
        snippets = [(lang, body) for lang, body in found if lang in ("c", "cpp", "cmake")]
        if not snippets:
            sys.exit(f"{args.readme}: '{SECTION}' has no C, C++ or CMake snippet")
        for lang, body in snippets:
            if not any(body in source for source in sources):
                sys.exit(f"{args.readme}: this {lang} snippet is in no file under "
                         f"{args.check_snippets}:\n{body}")


if __name__ == "__main__":
    main()
