#!/usr/bin/env bash
# Runs the libFuzzer targets of the sanitizer build (test/fuzz) for RUNS
# executions each (default 2000) from their seed corpora, after replaying the
# crashers kept as regression inputs:
#   pipeline     bytes parsed as a tp module, compiled to the per-rank step
#   safetensors  bytes read as a checkpoint of a small tp=2 model
#   tokens       bytes read as a token file and batched
#   manifest     bytes parsed as a step library's manifest and sliced
# A new crasher is written to test/fuzz/crashes/ (its name starts with the
# target's) and fails the run.
#
#   scripts/fuzz.sh [RUNS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-2000}
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(pipeline safetensors tokens manifest)

scripts/build.sh --sanitize
# As in scripts/test-sanitize.sh: no leak checks, no manual poisoning.
export ASAN_OPTIONS=detect_leaks=0:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# libFuzzer's link puts libstdc++ before the shared ASan runtime, which must
# come first: it is preloaded.
PRELOAD="LD_PRELOAD=$(clang++-22 -print-file-name=libclang_rt.asan-x86_64.so)"
OPTIONS=(-max_len=16384 -timeout=30 -rss_limit_mb=4096)

mkdir -p test/fuzz/crashes
shopt -s nullglob
# The corpora grow in copies: the seeds in the tree stay as they are.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in "${TARGETS[@]}"; do
  fuzzer=(env "$PRELOAD" "build-sanitize/bin/megatron-fuzz-$target")
  [[ -d test/fuzz/$target ]] || { echo "fuzz.sh: no target $target" >&2; exit 2; }
  kept=(test/fuzz/crashes/"$target"-{crash,leak,timeout,oom}-*)
  if ((${#kept[@]})); then
    "${fuzzer[@]}" "${OPTIONS[@]}" "${kept[@]}"
  fi
  mkdir "$work/$target"
  cp test/fuzz/"$target"/* "$work/$target"/
  "${fuzzer[@]}" "${OPTIONS[@]}" -runs="$RUNS" \
    -artifact_prefix=test/fuzz/crashes/"$target"- "$work/$target"
done
