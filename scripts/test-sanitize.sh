#!/usr/bin/env bash
# The sanitizer check (part of the test command): builds build-sanitize/
# (ASan + UBSan, clang-22; scripts/build.sh --sanitize) and runs under it
# every unit and end-to-end test of ctest and the compiler's lit suites.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh --sanitize
# Leaks are not checked: MLIR's and Open MPI's process-wide state lives until
# exit by design. Manual poisoning is off: LLVM's BumpPtrAllocator poisons
# its slabs in our instrumented copy of the template but not in Debian's
# uninstrumented libMLIR, which shares the allocators, so every such report
# would be false. Any other report ends the test that made it.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-sanitize --output-on-failure -j "$(nproc)"
"$(llvm-config-22 --bindir)/lit" -q build-sanitize/test/Dialect \
  build-sanitize/test/Analysis build-sanitize/test/Lowering build-sanitize/test/Conversion \
  build-sanitize/test/Models build-sanitize/test/Target \
  build-sanitize/test/Integration build-sanitize/test/Upstream
# A short fuzzing smoke; scripts/fuzz.sh RUNS runs a longer one.
scripts/fuzz.sh 2000
