#!/usr/bin/env python3
"""Fails when the runtime exports an entry point nothing calls.

The runtime's ABI is what its public headers declare with MRT_API
(runtime/include/megatron_rt/*.h). An entry point is called when the
compiler's lowering names it (a "mrt_..." string in lib/: the lowering picks
a kernel's variant by appending "_f32" or "_bf16" to its base name, so a base
name stands for those two) or megatron-run does (runtime/tools/megatron-run,
its tests excepted). The runtime's own sources and tests do not count: an
entry point that only they call is not part of what the compiler and the
launcher need, and is dead ABI.

usage: check_runtime_entry_points.py REPO_ROOT [-v]
"""
import pathlib
import re
import sys

# Entry points kept without a caller, each with the reason; an entry that a
# caller now covers, or that the runtime no longer exports, is an error, so
# that it goes when its reason does.
KEPT = {
    "mrt_broadcast_bytes":
        "an invalid broadcast root is the MPI error every rank raises at "
        "once, which runtime/unittests/CommFailure.cpp's mpi-error case "
        "needs to check that a failing collective ends the job (a mismatched "
        "count leaves mpirun itself hanging or crashing)",
}

COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)

DECLARED = re.compile(r"\bMRT_API\b[^;(]*?\b(mrt_\w+)\s*\(")
NAMED = re.compile(r"\bmrt_\w+")
VARIANTS = ("", "_f32", "_bf16")


def exported(root):
    names = {}
    for header in sorted((root / "runtime/include/megatron_rt").glob("*.h")):
        for match in DECLARED.finditer(header.read_text()):
            names[match.group(1)] = header.relative_to(root)
    return names


def code(path):
    """The file's text without its comments: a name a comment mentions is
    no call."""
    return COMMENT.sub("", path.read_text())


def lowering_calls(root):
    """(literal, file) of every "mrt_..." name the lowering spells."""
    for path in sorted((root / "lib").rglob("*")):
        if path.suffix in (".cpp", ".h", ".td"):
            for literal in re.findall(r'"(mrt_\w+)"', code(path)):
                yield literal, path.relative_to(root)


def called(root):
    names = {}
    for literal, path in lowering_calls(root):
        for suffix in VARIANTS:
            names.setdefault(literal + suffix, path)
    launcher = root / "runtime/tools/megatron-run"
    for path in sorted(launcher.glob("*")):
        if path.suffix in (".cpp", ".h"):
            for name in NAMED.findall(code(path)):
                names.setdefault(name, path.relative_to(root))
    return names


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1]).resolve()
    verbose = "-v" in argv[2:]
    declared, callers = exported(root), called(root)
    unused = sorted(set(declared) - set(callers) - set(KEPT))
    # The other way round: every kernel the lowering calls is exported.
    missing = sorted({(literal, str(path))
                      for literal, path in lowering_calls(root)
                      if not any(literal + suffix in declared
                                 for suffix in VARIANTS)})
    for literal, path in missing:
        print(f"{path}: calls {literal}, which the runtime does not export")
    stale = sorted(name for name in KEPT
                   if name not in declared or name in callers)
    for name in stale:
        print(f"{name}: listed as kept without a caller, but it has one or is "
              "not exported: drop it from KEPT")
    if verbose:
        for name in sorted(set(declared) & set(callers)):
            print(f"{name}: called from {callers[name]}")
    for name in unused:
        print(f"{declared[name]}: {name} is exported but neither the "
              "lowering nor megatron-run calls it")
    kept = len(set(KEPT) & set(declared) - set(callers))
    print(f"{len(declared)} exported entry points, {len(unused)} called by "
          f"nothing, {kept} kept without a caller")
    return 1 if unused or stale or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
