#!/usr/bin/env python3
"""Checks that every diagnostic of the tp dialect and the passes has a test.

usage: check_diagnostics.py REPO_ROOT [--verbose]

Scans the C++ sources under lib/Dialect, lib/Analysis, lib/Lowering and
lib/Conversion for diagnostics (emitError / emitOpError / emitWarning / emitRemark) and the
tests under test/ (.mlir and .test files) for the messages they check:

  * `expected-error`, `expected-warning` and `expected-remark` lines
    (-verify-diagnostics), and
  * FileCheck lines, under any prefix a RUN line declares, that check
    `error:`, `warning:` or `remark:` output.

Each diagnostic becomes a template: the literal text of the first string and
of the `<<` chain, with a hole wherever a value is streamed (an emitOpError
also gets the "'<op>' op " prefix MLIR prints). Named string constants
(`kShardingAttrName`, a file's `kMeshName`) are resolved. Diagnostics with the
same template are one distinct message, listed at each of its sites.

A checked message covers a template when
  1. it is a substring of some message the template can produce (a test that
     contradicts the template's literal text does not count),
  2. it contains enough of the template's literal text to name it: at least
     12 characters of it (or all of it) with two words that are not filler
     ("must", "be", "has", ...), so `{{must be}}` covers nothing, and
  3. no other template explains it better: among all templates it fits, it
     is credited to those of which it checks the most literal characters,
     ties broken by the share of the template's literal text it checks; a
     message that fits two diagnostics equally well covers neither. The
     messages spelt elsewhere under lib/ and tools/ (the model builder, the
     conversions, the drivers) compete too, so that a test of
     "--heads 7 does not divide the embedding width 768" does not count for
     tp.attention's "num_heads 7 does not divide the embedding width 768";
     they win only by fitting strictly better.

Prints every distinct message no test covers, with file:line, and exits 1 if
there is one, or if an ALLOWLIST entry has gone stale (0 otherwise).
--verbose also prints which test covers which message.
"""

import os
import re
import sys
from collections import defaultdict

SOURCE_DIRS = ("lib/Dialect", "lib/Analysis", "lib/Lowering", "lib/Conversion")
SOURCE_EXTS = (".cpp", ".h")
TEST_EXTS = (".mlir", ".test")
EMITTERS = {"emitError", "emitOpError", "emitWarning", "emitRemark"}

# Diagnostics that no IR input can reach: (path, a fragment of the message)
# -> why. Keep it short: an unreachable diagnostic should become an
# assertion. An entry that matches no diagnostic, or one a test now covers,
# is an error, so that it goes when its diagnostic does.
ALLOWLIST = {
    ("lib/Dialect/TP/Transforms/MixedPrecision.cpp", "has no precision rule"):
        "every tp op on float tensors declares PrecisionOpInterface "
        "(TPOps.td); the error stops an op added without a rule from "
        "silently computing in fp32",
    ("lib/Conversion/LinalgToGPU/OffloadToGPU.cpp",
     "cannot put its parallel dimensions first"):
        "interchangeGenericOp fails only on an order that is no "
        "permutation, and the order is the loops' parallel ones then the "
        "others",
    ("lib/Conversion/LinalgToGPU/OffloadToGPU.cpp",
     "cannot be lowered to parallel loops"):
        "linalgOpToParallelLoops fails only on tensors, which the pass "
        "refuses first ('works on tensors')",
    ("lib/Conversion/LinalgToGPU/OffloadToGPU.cpp", "cannot be mapped to the GPU"):
        "setMappingAttr fails only when two loops map to one processor; "
        "each tile loop takes its own block dimension, and only the "
        "innermost thread loop is not sequential",
}

MIN_CHARS = 12
MIN_WORDS = 2
FILLER = {
    "a", "an", "and", "at", "be", "but", "by", "for", "got", "has", "have",
    "in", "is", "it", "its", "least", "must", "needs", "no", "not", "of",
    "on", "one", "or", "the", "to", "with",
}

HOLE = None  # a pattern element that stands for any text


# ---------------------------------------------------------------------------
# C++ scanning
# ---------------------------------------------------------------------------

TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")
  | (?P<char>'(?:\\.|[^'\\\n])+')
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>\d[\w.']*)
  | (?P<punct>::|<<|->|&&|\|\||[^\s])
    """,
    re.VERBOSE | re.DOTALL,
)

ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def unescape(literal):
    body = literal[literal.index('"') + 1:-1]
    return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), m.group(1)),
                  body)


def tokenize(text):
    """(kind, value, line) for each token other than blanks and comments."""
    tokens = []
    line = 1
    for match in TOKEN_RE.finditer(text):
        kind = match.lastgroup
        value = match.group()
        if kind not in ("ws", "comment"):
            tokens.append((kind, value, line))
        line += value.count("\n")
    return tokens


CONSTANT_RE = re.compile(
    r'\b(k[A-Z]\w*)\s*=\s*"((?:\\.|[^"\\])*)"\s*;')


def string_constants(paths):
    constants = {}
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for name, value in CONSTANT_RE.findall(f.read()):
                constants[name] = unescape('"' + value + '"')
    return constants


def statement_end(tokens, start):
    """Index of the `;` (or unmatched closer) that ends the statement."""
    depth = 0
    for i in range(start, len(tokens)):
        kind, value, _ = tokens[i]
        if kind != "punct":
            continue
        if value in "([{":
            depth += 1
        elif value in ")]}":
            depth -= 1
            if depth < 0:
                return i
        elif value == ";" and depth == 0:
            return i
    return len(tokens)


def call_end(tokens, open_paren):
    depth = 0
    for i in range(open_paren, len(tokens)):
        kind, value, _ = tokens[i]
        if kind == "punct" and value in "([{":
            depth += 1
        elif kind == "punct" and value in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return len(tokens) - 1


def template_of(body, constants):
    """The pattern of the message spelled by `body`'s tokens: the literal
    text, with a HOLE wherever a value is streamed into it."""
    pattern = []      # characters and HOLEs
    pending = False   # a streamed value sits between the last text and here
    for i, (kind, value, _) in enumerate(body):
        text = None
        if kind == "string":
            text = unescape(value)
        elif kind == "ident" and value in constants and not (
                i + 1 < len(body) and body[i + 1][1] == "("):
            text = constants[value]
        elif kind == "char":
            text = unescape('"' + value[1:-1] + '"')
        if text is not None:
            if pending and (not pattern or pattern[-1] is not HOLE):
                pattern.append(HOLE)
            pending = False
            pattern.extend(text)
            continue
        if kind == "punct" and value in ("<<", "+", "(", ")", ",", "::"):
            continue
        if kind == "ident" and i + 1 < len(body) and body[i + 1][1] == "::":
            continue  # a namespace or class qualifier
        pending = True
    if pending and (not pattern or pattern[-1] is not HOLE):
        pattern.append(HOLE)
    return pattern


def is_string(token, constants):
    return token[0] == "string" or (token[0] == "ident" and
                                    token[1] in constants)


def build_template(tokens, name_index, constants):
    """The pattern of the message built from the emitter at `name_index`."""
    open_paren = name_index + 1
    close_paren = call_end(tokens, open_paren)
    end = statement_end(tokens, close_paren + 1)
    args = tokens[open_paren + 1:close_paren]
    # mlir::emitError(loc, "...") and parser.emitError(loc, "..."): the
    # arguments before the first string are the location, not the message.
    first_string = next((i for i, t in enumerate(args)
                         if is_string(t, constants)), None)
    body = (args[first_string:] if first_string is not None else []) + \
        tokens[close_paren + 1:end]
    return template_of(body, constants)


def bound_to_variable(tokens, index):
    """Whether the diagnostic at `index` is assigned to a variable
    (`InFlightDiagnostic diag = op->emitOpError() << ...`)."""
    for i in range(index - 1, -1, -1):
        kind, value, _ = tokens[i]
        if kind == "punct" and value in (";", "{", "}"):
            return False
        if kind == "punct" and value == "=" and \
                tokens[i - 1][1] not in ("=", "!", "<", ">") and \
                tokens[i + 1][1] != "=":
            return True
    return False


def other_messages(tokens, constants):
    """Every statement of a file outside SOURCE_DIRS that spells text, from
    its first string on: the messages of the tools, the model builder and
    the conversions. They are no diagnostics to cover, but a test that
    checks one of them must not count for a diagnostic it happens to fit."""
    templates = []
    start = 0
    for i, (kind, value, _) in enumerate(tokens + [("punct", ";", 0)]):
        if kind == "punct" and value in (";", "{", "}"):
            body = tokens[start:i]
            first = next((j for j, t in enumerate(body)
                          if t[0] == "string"), None)
            if first is not None:
                pattern = template_of(body[first:], constants)
                if any(c is not HOLE for c in pattern):
                    templates.append(pattern)
                    if any(t[1] == "emitOpError" for t in body):
                        templates.append(op_prefixed(pattern))
            start = i + 1
    return templates


def cpp_files(root, directories):
    paths = []
    for directory in directories:
        for dirpath, _, files in os.walk(os.path.join(root, directory)):
            paths += [os.path.join(dirpath, n) for n in files
                      if n.endswith(SOURCE_EXTS)]
    return sorted(paths)


def scan_sources(root):
    """(diagnostics, other messages): the diagnostics of SOURCE_DIRS as
    (relpath, line, emitter, pattern), and the patterns of every other
    message under lib/ and tools/."""
    include_paths = []
    for dirpath, _, files in os.walk(os.path.join(root, "include")):
        include_paths += [os.path.join(dirpath, n) for n in files
                          if n.endswith((".h", ".td"))]
    shared = string_constants(include_paths + [
        p for p in cpp_files(root, SOURCE_DIRS) if p.endswith(".h")])

    def read(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            constants = dict(shared)
            constants.update(string_constants([path]))
            return tokenize(f.read()), constants

    diagnostics = []
    for path in cpp_files(root, SOURCE_DIRS):
        tokens, constants = read(path)
        for i, (kind, value, line) in enumerate(tokens):
            if kind != "ident" or value not in EMITTERS:
                continue
            if i + 1 >= len(tokens) or tokens[i + 1][1] != "(":
                continue  # a function_ref parameter, not a call
            pattern = build_template(tokens, i, constants)
            if bound_to_variable(tokens, i) and pattern[-1:] != [HOLE]:
                pattern.append(HOLE)  # later statements stream more into it
            if not any(c is not HOLE for c in pattern):
                print(f"{os.path.relpath(path, root)}:{line}: warning: "
                      f"{value} with no literal text; cannot be checked",
                      file=sys.stderr)
                continue
            if value == "emitOpError":
                pattern = op_prefixed(pattern)
            diagnostics.append((os.path.relpath(path, root), line, value,
                                pattern))

    scanned = {os.path.normpath(os.path.join(root, d)) for d in SOURCE_DIRS}
    others = []
    for path in cpp_files(root, ("lib", "tools")):
        if any(os.path.commonpath([path, d]) == d for d in scanned):
            continue
        tokens, constants = read(path)
        others += other_messages(tokens, constants)
    return diagnostics, others


def op_prefixed(pattern):
    """MLIR prints an emitOpError as "'<op name>' op <message>"; the prefix
    matches but does not count as the message's text."""
    return [("'",), HOLE] + [(c,) for c in "' op "] + pattern


def literal_runs(pattern):
    """The literal fragments of a pattern, for printing."""
    runs, current = [], ""
    for element in pattern:
        if element is HOLE or isinstance(element, tuple):
            if current:
                runs.append(current)
            current = ""
        else:
            current += element
    if current:
        runs.append(current)
    return runs


def display(pattern):
    out = []
    for element in pattern:
        if element is HOLE:
            if not out or out[-1] != "<...>":
                out.append("<...>")
        elif isinstance(element, tuple):
            out.append(element[0])
        else:
            out.append(element)
    return "".join(out)


# ---------------------------------------------------------------------------
# Test scanning
# ---------------------------------------------------------------------------

EXPECTED_RE = re.compile(
    r"expected-(error|warning|remark)(-re)?\s*(?:@\S+)?\s*"
    r"\{\{(.*)\}\}")
PREFIX_RE = re.compile(r"-?-check-prefix(?:es)?[= ]([A-Za-z0-9_,-]+)")
CHECK_RE = re.compile(
    r"^\s*(?://|#|;)\s*([A-Za-z0-9_-]+?)(?:-NEXT|-SAME|-DAG|-LABEL|-EMPTY)?:"
    r"(.*?)\b(?:error|warning|remark):\s?(.*)$")
FILECHECK_HOLE_RE = re.compile(r"\{\{.*?\}\}|\[\[.*?\]\]")


def split_checked(text, regex_holes):
    """A checked message as the pieces between its regex holes."""
    if not regex_holes:
        return [text]
    return [p for p in FILECHECK_HOLE_RE.split(text) if p]


# A unit test's check of a message's text: message.find("...").
UNITTEST_CHECK_RE = re.compile(r'\.find\(\s*"((?:\\.|[^"\\])*)"')


def files_under(root, folder, extensions):
    """(relpath, lines) of every file under root/folder with one of the
    extensions, in a stable order."""
    for dirpath, _, files in sorted(os.walk(os.path.join(root, folder))):
        for name in sorted(files):
            if name.endswith(extensions):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    yield os.path.relpath(path, root), f.read().splitlines()


def lit_checks(rel, lines):
    """The messages a lit test checks: expected-* lines and FileCheck lines
    under the prefixes its RUN lines declare."""
    prefixes = {"CHECK"}
    for line in lines:
        if "RUN:" in line:
            for group in PREFIX_RE.findall(line):
                prefixes.update(group.split(","))
    for number, line in enumerate(lines, 1):
        match = EXPECTED_RE.search(line)
        if match:
            yield (rel, number, split_checked(match.group(3),
                                              bool(match.group(2))))
            continue
        match = CHECK_RE.match(line)
        if match and match.group(1) in prefixes:
            text = match.group(3).rstrip()
            # Tools may print the location before the message.
            text = re.sub(r'^loc\(.*?\):\s*', "", text)
            yield (rel, number, split_checked(text, True))


def unit_test_checks(rel, lines):
    """The messages a unit test looks for: a diagnostic only C++ can reach
    (a builder given what the parser never gives) is checked there."""
    for number, line in enumerate(lines, 1):
        for text in UNITTEST_CHECK_RE.findall(line):
            yield (rel, number, split_checked(unescape('"' + text + '"'),
                                              False))


def scan_tests(root):
    checks = []  # (relpath, line, pieces)
    for rel, lines in files_under(root, "test", TEST_EXTS):
        checks += lit_checks(rel, lines)
    for rel, lines in files_under(root, "unittests", SOURCE_EXTS):
        checks += unit_test_checks(rel, lines)
    return checks


# ---------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------

def best_alignment(piece, pattern):
    """How many scoring literal characters of `pattern` `piece` checks, as
    (characters, text of the runs), or None when `piece` is no substring of
    any message `pattern` produces. Prefix characters (tuples) match but do
    not score."""
    n = len(pattern)
    # state: pattern index -> (score, runs so far as a list of strings)
    states = {}
    for j in range(n + 1):
        states[j] = (0, ())
    for ch in piece:
        nxt = {}

        def offer(j, value):
            if j not in nxt or value[0] > nxt[j][0]:
                nxt[j] = value

        for j, (score, runs) in states.items():
            # Epsilon: a hole may match nothing; closure handled by scanning
            # forward over holes.
            k = j
            while True:
                if k < n and pattern[k] is HOLE:
                    offer(k, (score, runs + ("\0",)))  # stay in the hole
                    k += 1
                    continue
                break
            for start in range(j, k + 1):
                if start < n and pattern[start] is not HOLE:
                    element = pattern[start]
                    if isinstance(element, tuple):
                        if element[0] == ch:
                            offer(start + 1, (score, runs + ("\0",)))
                    elif element == ch:
                        offer(start + 1, (score + 1, runs + (ch,)))
        states = nxt
        if not states:
            return None
    score, runs = max(states.values(), key=lambda v: v[0])
    return score, "".join(runs).split("\0")


def specific(score, runs, total_chars, total_words):
    """Whether checked literal text is enough to name its template: 12
    characters (or all of them) and two words other than filler (or all the
    template's words when it has fewer)."""
    if score < min(MIN_CHARS, total_chars):
        return False
    words = [w for run in runs for w in re.findall(r"[A-Za-z]+", run)
             if w.lower() not in FILLER]
    return len(words) >= min(MIN_WORDS, total_words)


GRAM = 4


def grams_of(text):
    return {text[i:i + GRAM] for i in range(len(text) - GRAM + 1)}


def literal_grams(key):
    """The 4-grams of a template's literal text: a check sharing none of
    them cannot reach MIN_CHARS of it in runs of fewer than four."""
    grams = set()
    for run in literal_runs(list(key)):
        grams |= grams_of(run)
    return grams


def content_words(key):
    text = "\0".join(literal_runs(list(key)))
    return len([w for w in re.findall(r"[A-Za-z]+", text)
                if w.lower() not in FILLER])


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("-")]
    verbose = "--verbose" in argv or "-v" in argv
    if len(args) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = os.path.abspath(args[0])

    diagnostics, others = scan_sources(root)
    templates = defaultdict(list)  # pattern key -> sites
    for rel, line, kind, pattern in diagnostics:
        templates[tuple(pattern)].append((rel, line, kind))
    candidates = list(templates) + [tuple(p) for p in others
                                    if tuple(p) not in templates]

    totals = {key: sum(1 for c in key if isinstance(c, str))
              for key in candidates}
    words = {key: content_words(key) for key in candidates}
    grams = {key: literal_grams(key) for key in candidates}
    covered = defaultdict(list)
    ambiguous = []
    for rel, line, pieces in scan_tests(root):
        fits = []
        piece_grams = set().union(*(grams_of(p) for p in pieces))
        for key in candidates:
            if totals[key] == 0 or (grams[key] and
                                    not grams[key] & piece_grams):
                continue
            score, runs, ok = 0, [], True
            for piece in pieces:
                result = best_alignment(piece, list(key))
                if result is None:
                    ok = False
                    break
                score += result[0]
                runs += result[1]
            if ok and specific(score, runs, totals[key], words[key]):
                fits.append((score, score / totals[key], key))
        if not fits:
            continue
        best = max(f[:2] for f in fits)
        winners = [f[2] for f in fits if f[:2] == best]
        # A message outside SOURCE_DIRS takes the credit only when it fits
        # strictly better; spelt the same, it does not hide the diagnostic.
        ours = [w for w in winners if w in templates]
        if ours:
            winners = ours
        if len(winners) > 1:
            if ours:
                ambiguous.append((rel, line, winners))
            continue
        if winners[0] in templates:
            covered[winners[0]].append(f"{rel}:{line}")

    uncovered = []
    allowed = []
    used = set()
    problems = 0  # stale allowlist entries
    for key, sites in templates.items():
        entries = [entry for entry in ALLOWLIST
                   if entry[1] in display(key) and
                   any(rel == entry[0] for rel, _, _ in sites)]
        if key in covered:
            if verbose:
                print(f"covered: {display(key)!r} by {covered[key][0]}")
            if entries:
                print(f"{entries[0][0]}: error: allowlisted "
                      f"{entries[0][1]!r} has a test now "
                      f"({covered[key][0]}); drop it from the allowlist")
                problems += 1
            continue
        if entries:
            used.update(entries)
            allowed.append((key, sites, ALLOWLIST[entries[0]]))
        else:
            uncovered.append((key, sites))
    for entry in ALLOWLIST:
        if entry not in used and not any(
                entry[1] in display(key) and key in covered
                for key in templates):
            print(f"{entry[0]}: error: allowlisted {entry[1]!r} matches no "
                  f"diagnostic; drop it from the allowlist")
            problems += 1

    for rel, line, winners in ambiguous:
        print(f"{rel}:{line}: note: fits "
              + " and ".join(repr(display(w)) for w in winners)
              + " equally well; covers neither")
    if verbose:
        for key, sites, reason in allowed:
            print(f"allowlisted: {display(key)!r} ({reason})")

    for key, sites in sorted(uncovered, key=lambda u: u[1][0][:2]):
        for rel, line, kind in sites:
            print(f"{rel}:{line}: {kind} has no test: {display(key)!r}")
    print(f"{len(templates)} distinct diagnostics at {len(diagnostics)} sites; "
          f"{len(uncovered)} without a test"
          + (f", {len(allowed)} allowlisted as unreachable" if allowed else ""))
    return 1 if uncovered or problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
