#!/usr/bin/env python3
"""Rewrites the CUDA kernel sources into C++ for the CPU emulator.

    transform.py --kernels runtime/cuda/lib/kernels --output DIR

Every *.cu and *.cuh of the kernel directory is written to DIR with the
CUDA-only syntax replaced by calls into shim/cuda_runtime.h:

  kernel<<<grid, block, bytes, stream>>>(args);
      -> emu::launch(emu::LaunchConfig(grid, block, bytes, stream),
                     [&](auto... launchArgs) { kernel(launchArgs...); }, args);
  extern __shared__ T name[];   -> T *name = emu::dynamicShared<T>();
  __shared__ T name[N];         -> auto &name = emu::staticShared<T[N]>([] {});
  asm volatile("cp.async...")   -> emu::cpAsync / CommitGroup / WaitGroup
  mrt_<entry point>             -> gpu_mrt_<entry point> (the ABI's types
                                   and inline functions keep their names)

The renaming lets the GPU entry points link beside libmegatron_rt's;
DIR/gpu_entry_points.h declares them. Any asm statement, launch or shared
declaration of another form is an error naming the file, line and
construct: a kernel must not reach the emulator half translated. Line
numbers are kept, and a #line directive points diagnostics at the source.
"""

import argparse
import pathlib
import re
import sys


class TransformError(Exception):
    pass


def mask(text):
    """text with comments and the insides of string and character literals
    blanked (newlines kept), so searches see code only at the same offsets."""
    out = list(text)
    i, n = 0, len(text)

    def blank(start, end):
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif text[i] in "\"'" and not (text[i] == "'" and i > 0 and text[i - 1].isalnum()):
            quote, k = text[i], i + 1
            while k < n and text[k] != quote:
                k += 2 if text[k] == "\\" else 1
            blank(i + 1, k)
            i = k + 1
        else:
            i += 1
    return "".join(out)


class Source:
    def __init__(self, path, text):
        self.path = path
        self.text = text
        self.counts = {}

    def line(self, pos):
        return self.text.count("\n", 0, pos) + 1

    def error(self, pos, what):
        snippet = " ".join(self.text[pos:pos + 80].split())
        raise TransformError(f"{self.path}:{self.line(pos)}: {what}: {snippet}")

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def rewrite(self, edits):
        """Applies (start, end, replacement) edits, padding each replacement
        with the newlines it drops so every later line keeps its number."""
        for start, end, new in sorted(edits, reverse=True):
            old = self.text[start:end]
            if new.count("\n") > old.count("\n"):
                raise TransformError(f"{self.path}: a rewrite adds lines")
            new += "\n" * (old.count("\n") - new.count("\n"))
            self.text = self.text[:start] + new + self.text[end:]


def matching(masked, pos, open_char, close_char):
    """Offset just past the bracket closing the one at pos."""
    depth = 0
    for k in range(pos, len(masked)):
        if masked[k] == open_char:
            depth += 1
        elif masked[k] == close_char:
            depth -= 1
            if depth == 0:
                return k + 1
    return -1


def balanced(masked):
    """Whether every bracket in masked closes within it, in order."""
    stack = []
    for c in masked:
        if c in "([{":
            stack.append(")]}"["([{".index(c)])
        elif c in ")]}" and (not stack or stack.pop() != c):
            return False
    return not stack


def split_top_level(masked, start, end, separator):
    """(start, end) spans of masked[start:end] between separators outside
    any brackets."""
    spans, depth, first = [], 0, start
    for k in range(start, end):
        c = masked[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == separator and depth == 0:
            spans.append((first, k))
            first = k + 1
    spans.append((first, end))
    return spans


# --- asm statements --------------------------------------------------------

CP_ASYNC = re.compile(r"cp\.async\.(ca|cg)\.shared\.global \[%0\], \[%1\], (4|8|16), %2;")
ASM_START = re.compile(r"\b(asm|__asm__|__asm)\b(\s+(volatile|__volatile__))?\s*\(")
OPERAND = re.compile(r'^"([^"]*)"\s*\((.*)\)$', re.S)


def asm_template(source, span):
    """The concatenated string literals of an asm template, escapes of
    whitespace read as whitespace and runs of it as one space."""
    raw = source.text[span[0]:span[1]]
    literals = re.findall(r'"((?:[^"\\]|\\.)*)"', raw)
    if not literals or re.sub(r'"((?:[^"\\]|\\.)*)"', "", raw).strip():
        return None
    text = "".join(literals).replace("\\n", " ").replace("\\t", " ")
    return " ".join(text.split())


def asm_operands(source, masked, span):
    """[(constraint, expression)] of an operand list."""
    if not masked[span[0]:span[1]].strip():
        return []
    operands = []
    for start, end in split_top_level(masked, span[0], span[1], ","):
        m = OPERAND.match(source.text[start:end].strip())
        if not m:
            return None
        operands.append((m.group(1), m.group(2).strip()))
    return operands


def asm_call(template, inputs):
    """The emulator call for a recognised PTX template, else None."""
    constraints = [c for c, _ in inputs]
    args = [e for _, e in inputs]
    m = CP_ASYNC.fullmatch(template)
    if m and constraints == ["r", "l", "r"] and (m.group(1) == "ca" or m.group(2) == "16"):
        return f"asm cp.async.{m.group(1)}", f"emu::cpAsync({args[0]}, {args[1]}, {m.group(2)}, {args[2]});"
    if template == "cp.async.commit_group;" and not inputs:
        return "asm cp.async.commit_group", "emu::cpAsyncCommitGroup();"
    if template == "cp.async.wait_group %0;" and constraints == ["n"]:
        return "asm cp.async.wait_group", f"emu::cpAsyncWaitGroup({args[0]});"
    return None


def rewrite_asm(source):
    masked = mask(source.text)
    edits = []
    for m in re.finditer(r"\b(asm|__asm__|__asm)\b", masked):
        start = m.start()
        head = ASM_START.match(masked, start)
        close = matching(masked, head.end() - 1, "(", ")") if head else -1
        semicolon = re.compile(r"\s*;").match(masked, close) if close > 0 else None
        if not semicolon:
            source.error(start, "asm statement not understood")
        sections = split_top_level(masked, head.end(), close - 1, ":")
        template = asm_template(source, sections[0])
        outputs = asm_operands(source, masked, sections[1]) if len(sections) > 1 else []
        inputs = asm_operands(source, masked, sections[2]) if len(sections) > 2 else []
        clobbers = source.text[slice(*sections[3])].split(",") if len(sections) > 3 else []
        recognised = (template is not None and outputs == [] and inputs is not None
                      and len(sections) <= 4
                      and all(c.strip() in ('"memory"', "") for c in clobbers))
        call = asm_call(template, inputs) if recognised else None
        if not call:
            source.error(start, "asm statement the emulator does not implement")
        source.count(call[0])
        edits.append((start, semicolon.end(), call[1]))
    source.rewrite(edits)


# --- kernel launches -------------------------------------------------------

KERNEL_NAME = re.compile(r"[A-Za-z_][\w:]*")


def kernel_expression_start(masked, launch):
    """Start of the kernel expression before <<< at launch: a (qualified)
    name with optional template arguments."""
    k = launch - 1
    while k >= 0 and masked[k].isspace():
        k -= 1
    if k >= 0 and masked[k] == ">":
        depth = 0
        while k >= 0:
            depth += {">": 1, "<": -1}.get(masked[k], 0)
            if depth == 0:
                break
            k -= 1
        k -= 1
    end = k + 1
    while k >= 0 and (masked[k].isalnum() or masked[k] in "_:"):
        k -= 1
    start = k + 1
    # The launch must be a statement of its own, not part of an expression
    # (obj.kernel<<<...>>>, x = k<<<...>>>).
    before = masked[:start].rstrip()
    statement = before[-1:] in ("", ";", "{", "}", ")") or re.search(r"\b(else|do)$", before)
    return start if statement and KERNEL_NAME.fullmatch(masked[start:end]) else -1


def rewrite_launches(source):
    masked = mask(source.text)
    edits = []
    for m in re.finditer(r"<<<", masked):
        start = kernel_expression_start(masked, m.start())
        config_end = masked.find(">>>", m.end())
        args_open = re.compile(r"\s*\(").match(masked, config_end + 3) if config_end > 0 else None
        args_close = matching(masked, args_open.end() - 1, "(", ")") if args_open else -1
        semicolon = re.compile(r"\s*;").match(masked, args_close) if args_close > 0 else None
        config = split_top_level(masked, m.end(), config_end, ",") if config_end > 0 else []
        if start < 0 or not semicolon or not 2 <= len(config) <= 4 or \
                not balanced(masked[m.end():config_end]):
            source.error(max(start, masked.rfind("\n", 0, m.start()) + 1),
                         "kernel launch the emulator does not understand")
        kernel = source.text[start:m.start()].strip()
        settings = ", ".join(source.text[a:b].strip() for a, b in config)
        args = source.text[args_open.end():args_close - 1]
        call = (f"emu::launch(emu::LaunchConfig({settings}), "
                f"[&](auto... launchArgs) {{ {kernel}(launchArgs...); }}")
        call += f", {args.strip()});" if masked[args_open.end():args_close - 1].strip() else ");"
        source.count("launches")
        edits.append((start, semicolon.end(), call))
    source.rewrite(edits)


# --- shared memory ---------------------------------------------------------

DYNAMIC_SHARED = re.compile(r"\bextern\s+__shared__\s+([\w:<>, ]+?)\s+(\w+)\s*\[\s*\]\s*;")
STATIC_SHARED = re.compile(r"\b__shared__\s+([\w:<>, ]+?)\s+(\w+)\s*((?:\[[^\[\];]+\])*)\s*;")


def function_scope(masked, pos):
    """Whether pos lies inside a function body: inside a brace that is not
    a namespace's, an extern "C" block's or a class's."""
    stack = []
    for m in re.finditer(r"[{}]", masked[:pos]):
        if m.group() == "}":
            stack.pop()
            continue
        before = masked[max(0, m.start() - 200):m.start()]
        opener = re.search(r"(\bnamespace\b[\w:\s]*|\bextern\s+\"\s*\"\s*|"
                           r"\b(struct|class|union)\b[^;{}()]*)$", before)
        stack.append(opener is None)
    return any(stack)


def rewrite_shared(source):
    masked = mask(source.text)
    edits = []
    for m in DYNAMIC_SHARED.finditer(masked):
        if not function_scope(masked, m.start()):
            source.error(m.start(), "extern __shared__ outside a function")
        kind, name = source.text[slice(*m.span(1))], m.group(2)
        source.count("extern __shared__ arrays")
        edits.append((m.start(), m.end(), f"{kind} *{name} = emu::dynamicShared<{kind}>();"))
    source.rewrite(edits)
    masked = mask(source.text)
    edits = []
    for m in STATIC_SHARED.finditer(masked):
        # A qualifier before it (static, extern, __align__) is not handled.
        if masked[:m.start()].rstrip()[-1:] not in ("", ";", "{", "}"):
            source.error(m.start(), "qualified __shared__ declaration")
        if not function_scope(masked, m.start()):
            source.error(m.start(), "__shared__ outside a function")
        kind = source.text[slice(*m.span(1))] + source.text[slice(*m.span(3))]
        source.count("__shared__ declarations")
        edits.append((m.start(), m.end(),
                      f"auto &{m.group(2)} = emu::staticShared<{kind}>([] {{}});"))
    source.rewrite(edits)
    leftover = mask(source.text).find("__shared__")
    if leftover >= 0:
        source.error(leftover, "__shared__ declaration the emulator does not understand")


# --- entry points ----------------------------------------------------------

ENTRY_DEFINITION = re.compile(r'\bextern\s+"\s*"\s+([^;{}()"]+?)\b(gpu_mrt_\w+)\s*\(')

# Types and inline functions of the C ABI headers (megatron_rt/api.h,
# dropout.h): shared by both runtimes, so they keep their names.
ABI_SHARED_NAMES = {"mrt_bf16", "mrt_bf16_round", "mrt_philox4x32_10",
             "mrt_dropout_block", "mrt_dropout_threshold"}


def rename_entry_points(source):
    masked = mask(source.text)
    edits = [(m.start(), m.end(), "gpu_" + m.group())
             for m in re.finditer(r"\bmrt_\w+", masked)
             if m.group() not in ABI_SHARED_NAMES]
    source.rewrite(edits)
    masked = mask(source.text)
    entries = []
    for m in ENTRY_DEFINITION.finditer(masked):
        close = matching(masked, m.end() - 1, "(", ")")
        if re.compile(r"\s*\{").match(masked, close):
            signature = " ".join(source.text[m.start(1):close].split()).replace("( ", "(")
            entries.append((m.group(2)[len("gpu_"):], signature))
            source.count("entry points")
    return entries


def transform(path):
    source = Source(path, path.read_text())
    rewrite_asm(source)
    rewrite_launches(source)
    rewrite_shared(source)
    entries = rename_entry_points(source)
    text = (f"// Generated by transform.py from {path}: do not edit.\n"
            f'#include "gpu_entry_points.h"\n'
            f'#line 1 "{path}"\n' + source.text)
    return text, entries, source.counts


def entry_points_header(entries):
    lines = ["// Generated by transform.py: the kernels' entry points, renamed.",
             "#ifndef MEGATRON_RT_CUDA_EMULATOR_GPU_ENTRY_POINTS_H",
             "#define MEGATRON_RT_CUDA_EMULATOR_GPU_ENTRY_POINTS_H",
             "", '#include "megatron_rt/api.h"', "", "#include <cstdint>", "",
             'extern "C" {']
    lines += [f"{signature};" for _, signature in entries]
    lines += ["}", "", "// X(mrt_name) for each GPU entry point gpu_mrt_name.",
              "#define MEGATRON_RT_GPU_ENTRY_POINTS(X) \\"]
    lines += [f"  X({name}) \\" for name, _ in entries]
    lines += ["", "#endif", ""]
    return "\n".join(lines)


def write_if_changed(path, text):
    """Leaves an unchanged file's timestamp alone, so the build does not
    recompile what the rewrite did not touch."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", type=pathlib.Path, required=True)
    parser.add_argument("--output", type=pathlib.Path, required=True)
    options = parser.parse_args()
    options.output.mkdir(parents=True, exist_ok=True)
    entries = []
    sources = sorted(options.kernels.glob("*.cu")) + sorted(options.kernels.glob("*.cuh"))
    try:
        for path in sources:
            text, file_entries, counts = transform(path.resolve())
            entries += file_entries
            # .cu as .cpp so the host compiler reads them as C++.
            name = path.stem + ".cpp" if path.suffix == ".cu" else path.name
            write_if_changed(options.output / name, text)
            summary = ", ".join(f"{what} {n}" for what, n in sorted(counts.items()))
            print(f"cuda-emulator: {path.name}: {summary or 'nothing rewritten'}")
    except TransformError as error:
        print(f"cuda-emulator: error: {error}", file=sys.stderr)
        return 1
    write_if_changed(options.output / "gpu_entry_points.h", entry_points_header(entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
