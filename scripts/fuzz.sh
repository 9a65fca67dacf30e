#!/usr/bin/env bash
# Runs the libFuzzer target of the sanitizer build (test/fuzz: bytes parsed
# as a tp module and compiled to the per-rank training step) for RUNS
# executions (default 2000) from its seed corpus, after replaying the
# crashers kept as regression inputs. A new crasher is written to
# test/fuzz/crashes/ and fails the run.
#
#   scripts/fuzz.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-2000}

scripts/build.sh --sanitize
# As in scripts/test-sanitize.sh: no leak checks, no manual poisoning.
export ASAN_OPTIONS=detect_leaks=0:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# libFuzzer's link puts libstdc++ before the shared ASan runtime, which must
# come first: it is preloaded.
FUZZER=(env "LD_PRELOAD=$(clang++-22 -print-file-name=libclang_rt.asan-x86_64.so)"
        build-sanitize/bin/megatron-fuzz-pipeline)
OPTIONS=(-max_len=16384 -timeout=30 -rss_limit_mb=4096)

mkdir -p test/fuzz/crashes
shopt -s nullglob
kept=(test/fuzz/crashes/{crash,leak,timeout,oom}-*)
if ((${#kept[@]})); then
  "${FUZZER[@]}" "${OPTIONS[@]}" "${kept[@]}"
fi
# The corpus grows in a copy: the seeds in the tree stay as they are.
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp test/fuzz/pipeline/* "$corpus"/
"${FUZZER[@]}" "${OPTIONS[@]}" -runs="$RUNS" -artifact_prefix=test/fuzz/crashes/ \
  "$corpus"
