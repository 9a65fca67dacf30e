#!/usr/bin/env python3
"""Runs the commands of a Markdown guide and checks that they print what the
guide shows (test/Docs/megatron-guide.test).

  check_guide.py GUIDE.md [--bin DIR] [--times]

Every fenced block opened with ```console is a transcript:

  - a line starting with "$ " is a command; the lines right after it that
    start with "> " continue it (joined with newlines, as bash's PS2 shows
    them);
  - the lines up to the next command or the end of the block are what the
    command prints on stdout. A line that is exactly "..." matches any
    number of lines (none included); every other line must match exactly,
    trailing whitespace ignored, as are trailing blank lines.

Commands run with `bash -c`, `set -o pipefail` first, PATH prefixed by
--bin (default: build/bin of this checkout) and DOCS set to the guide's
folder (so a command can compare with a file checked in beside the guide).
With pipefail, `tool | head -3` fails when head's early exit kills the tool
(SIGPIPE, exit 141): a guide shows `sed -n 1,3p` instead.
The commands of one block run one after another in one fresh temporary
folder, so a block may write a file that its later commands read; each
block gets its own folder. Only stdout is compared; stderr is shown when a
command fails. A command that exits non-zero, runs past --timeout seconds or
prints something else fails with the guide's line number, the command and a
unified diff; the others are still run. On success it prints
"GUIDE: N commands print what the guide shows".
"""
import argparse
import difflib
import os
import pathlib
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
FENCE_OPEN = "```console"
FENCE = "```"
ELLIPSIS = "..."


class Command:
    def __init__(self, line, text):
        self.line = line        # 1-based line of the "$ " in the guide
        self.text = text        # the command, continuation lines joined
        self.expected = []      # expected stdout lines


def parse(path):
    """The guide's console blocks: a list of blocks, each a list of Commands."""
    lines = path.read_text().splitlines()
    blocks, errors = [], []
    i = 0
    while i < len(lines):
        if lines[i].strip() != FENCE_OPEN:
            i += 1
            continue
        start = i + 1
        i += 1
        block = []
        while i < len(lines) and lines[i].strip() != FENCE:
            line = lines[i]
            if line.startswith("$ "):
                block.append(Command(i + 1, line[2:]))
            elif line.startswith("> ") and block and not block[-1].expected:
                block[-1].text += "\n" + line[2:]
            elif block:
                block[-1].expected.append(line)
            elif line.strip():
                errors.append(f"{path}:{i + 1}: output before the block's "
                              "first command")
            i += 1
        if i == len(lines):
            errors.append(f"{path}:{start}: console block is not closed")
        if not block:
            errors.append(f"{path}:{start}: console block without a command")
        blocks.append(block)
        i += 1
    return blocks, errors


def normalize(lines):
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def matches(expected, actual):
    """Whether actual matches expected, where an "..." line matches any
    number of lines."""
    # reach[j]: expected[:i] can match actual[:j].
    reach = [True] + [False] * len(actual)
    for want in expected:
        if want == ELLIPSIS:
            for j in range(1, len(actual) + 1):
                reach[j] = reach[j] or reach[j - 1]
        else:
            reach = [False] + [reach[j - 1] and actual[j - 1] == want
                               for j in range(1, len(actual) + 1)]
    return reach[len(actual)]


def run_block(block, env, timeout, report, times):
    failures = 0
    with tempfile.TemporaryDirectory(prefix="check-guide-") as cwd:
        for command in block:
            started = time.monotonic()
            try:
                result = subprocess.run(
                    ["bash", "-c", "set -o pipefail\n" + command.text],
                    cwd=cwd, env=env, capture_output=True, text=True,
                    timeout=timeout)
                code, out, err = result.returncode, result.stdout, result.stderr
            except subprocess.TimeoutExpired as expired:
                code = f"timed out after {timeout} s"
                out = expired.stdout or ""
                err = expired.stderr or ""
                if isinstance(out, bytes):
                    out = out.decode(errors="replace")
                if isinstance(err, bytes):
                    err = err.decode(errors="replace")
            seconds = time.monotonic() - started
            if times:
                first = command.text.splitlines()[0]
                print(f"{seconds:7.2f} s  {report}:{command.line}: {first}")
            expected = normalize(command.expected)
            actual = normalize(out.splitlines())
            where = f"{report}:{command.line}"
            shown = "\n".join("  $ " + line if k == 0 else "  > " + line
                              for k, line in enumerate(command.text.splitlines()))
            if code != 0:
                failures += 1
                reason = code if isinstance(code, str) else f"exit code {code}"
                print(f"{where}: command failed ({reason}):\n{shown}")
                if err.strip():
                    print("stderr:\n" + "\n".join("  " + line
                                                  for line in err.splitlines()[-20:]))
            elif not matches(expected, actual):
                failures += 1
                print(f"{where}: output differs from the guide:\n{shown}")
                diff = difflib.unified_diff(expected, actual, "guide", "actual",
                                            lineterm="")
                print("\n".join(diff))
    return failures


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("guide", type=pathlib.Path)
    parser.add_argument("--bin", type=pathlib.Path, default=ROOT / "build" / "bin",
                        help="folder of the tools, put first on PATH")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds one command may run")
    parser.add_argument("--times", action="store_true",
                        help="print how long each command took")
    args = parser.parse_args()

    guide = args.guide.resolve()
    try:
        report = str(guide.relative_to(ROOT))
    except ValueError:
        report = str(args.guide)
    blocks, errors = parse(guide)
    if errors:
        print("\n".join(errors))
        return 1
    count = sum(len(block) for block in blocks)
    if count == 0:
        print(f"{report}: no ```console block with a command")
        return 1
    if not args.bin.is_dir():
        print(f"{report}: --bin {args.bin} is not a folder")
        return 1

    env = dict(os.environ)
    env["PATH"] = str(args.bin.resolve()) + os.pathsep + env.get("PATH", "")
    env["DOCS"] = str(guide.parent)
    env["LC_ALL"] = "C"
    failures = sum(run_block(block, env, args.timeout, report, args.times)
                   for block in blocks)
    if failures:
        print(f"{report}: {failures} of {count} commands do not print what "
              "the guide shows")
        return 1
    print(f"{report}: {count} commands print what the guide shows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
