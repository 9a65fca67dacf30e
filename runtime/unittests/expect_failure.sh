#!/usr/bin/env bash
# Usage: expect_failure.sh <max-seconds> <output-regex> <command...>
# Passes when the command fails (non-zero exit, not the 60 s watchdog's 124)
# within max-seconds and its combined output matches the extended regex.
set -u
max_seconds=$1 pattern=$2
shift 2
start=$(date +%s)
output=$(timeout 60 "$@" 2>&1)
rc=$?
elapsed=$(($(date +%s) - start))
printf '%s\n' "$output"
echo "-- exit code $rc after ${elapsed}s"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -ne 0 ] || fail "the command succeeded"
[ "$rc" -ne 124 ] || fail "the command hung until the 60 s timeout"
[ "$elapsed" -le "$max_seconds" ] || fail "took longer than ${max_seconds}s"
grep -Eq -- "$pattern" <<<"$output" || fail "output does not match: $pattern"
echo "PASS"
