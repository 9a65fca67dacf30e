#!/usr/bin/env bash
# What an embedder gets (the README's "Embedding"): installs build/ into a
# temporary prefix and moves it, then checks that
#   - no file in the tree names the build or the source directory, and
#     every binary and library finds its neighbours through $ORIGIN;
#   - the C++ and C examples configure with find_package against the moved
#     tree alone, partition a tp module as megatron-opt does, and compile
#     the same step library megatron-compile writes;
#   - a step moved away from every runtime still trains under the installed
#     megatron-run, and errors reach an embedder located;
#   - the README's Embedding commands run as written, and its snippets are
#     the examples' code.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=$(realpath build)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MLIR_CMAKE_DIR="$(llvm-config-22 --cmakedir)/../mlir"
fail() { echo "check-install: $*" >&2; exit 1; }

cmake --install build --prefix "$WORK/staged" > /dev/null
mv "$WORK/staged" "$WORK/prefix"
P=$WORK/prefix

# Nothing points back into the checkout.
if grep -rlI -e "$BUILD_DIR" -e "$ROOT/" "$P"; then
  fail "the files above name the build or source directory"
fi
if grep -rl -e "$BUILD_DIR" -e "$ROOT/" "$P/bin" "$P/lib"; then
  fail "the binaries above name the build or source directory"
fi
for elf in "$P"/bin/* "$P"/lib/*.so; do
  paths=$(readelf -d "$elf" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
  [[ $paths == *'$ORIGIN/../lib'* ]] || fail "$elf: search path '$paths' lacks \$ORIGIN/../lib"
done

# The examples, against the moved tree.
for example in embed-cpp embed-c; do
  cmake -S examples/$example -B "$WORK/$example" -G Ninja \
    -DMegatronMLIR_DIR="$P/lib/cmake/megatron-mlir" \
    -DMLIR_DIR="$MLIR_CMAKE_DIR" > "$WORK/$example.log" ||
    { cat "$WORK/$example.log"; fail "configuring $example"; }
  cmake --build "$WORK/$example" > "$WORK/$example.log" ||
    { cat "$WORK/$example.log"; fail "building $example"; }
done
CPP=$WORK/embed-cpp/embed-cpp
C=$WORK/embed-c/embed-c

"$P/bin/gpt2-mlir" --preset=tiny -o "$WORK/tiny.mlir"
# embed-cpp stops where megatron-compile's per-rank program is complete:
# the Megatron pipeline, then (for a CPU forward step) the started
# collectives of tp-overlap-collectives; embed-c runs the pipeline it names.
"$P/bin/megatron-opt" "$WORK/tiny.mlir" --megatron-pipeline=tp=2 -o "$WORK/opt.mlir"
"$P/bin/megatron-opt" "$WORK/tiny.mlir" --megatron-pipeline=tp=2 \
  --tp-overlap-collectives -o "$WORK/opt-overlap.mlir"
"$CPP" "$WORK/tiny.mlir" 2 > "$WORK/cpp.mlir"
"$C" "$WORK/tiny.mlir" 'builtin.module(megatron-pipeline{tp=2})' > "$WORK/c.mlir"
grep -q 'tp.partitioned' "$WORK/opt.mlir" || fail "megatron-opt did not partition"
grep -q 'tp.all_reduce_start' "$WORK/opt-overlap.mlir" || fail "megatron-opt started no collective"
cmp "$WORK/opt-overlap.mlir" "$WORK/cpp.mlir" || fail "embed-cpp partitions unlike megatron-opt"
cmp "$WORK/opt.mlir" "$WORK/c.mlir" || fail "embed-c partitions unlike megatron-opt"

mkdir -p "$WORK/steps"
"$P/bin/megatron-compile" "$WORK/tiny.mlir" --tp=2 --train -o "$WORK/steps/tool.so"
"$CPP" "$WORK/tiny.mlir" 2 "$WORK/steps/cpp.so"
"$C" "$WORK/tiny.mlir" 'builtin.module(megatron-compile-pipeline{tp=2 train=true})' "$WORK/steps/c.so"
cmp "$WORK/steps/tool.so" "$WORK/steps/cpp.so" || fail "embed-cpp's step differs from megatron-compile's"
cmp "$WORK/steps/tool.so" "$WORK/steps/c.so" || fail "embed-c's step differs from megatron-compile's"

# A step moved alone still finds a runtime: megatron-run's.
mkdir -p "$WORK/elsewhere/deeper"
mv "$WORK/steps/c.so" "$WORK/elsewhere/deeper/step.so"
python3 -c "import numpy as np; np.array((np.arange(4096) * 7) % 256, dtype=np.uint16).tofile('$WORK/tokens.bin')"
# The step lines without their timings (ms, tokens/s, eta), which vary.
run() { mpirun --oversubscribe -np 2 "$P/bin/megatron-run" "$1" --data "$WORK/tokens.bin" \
          --steps 3 --lr 1e-3 2>> "$WORK/run.log" | sed -E 's/ ms .*//'; }
run "$WORK/steps/tool.so" > "$WORK/tool.txt"
run "$WORK/elsewhere/deeper/step.so" > "$WORK/moved.txt"
grep -q '^step 2 loss' "$WORK/tool.txt" || { cat "$WORK/tool.txt"; fail "the installed megatron-run did not train"; }
cmp "$WORK/tool.txt" "$WORK/moved.txt" || fail "the moved step trains unlike the one in place"

# Errors reach an embedder located, with a non-zero exit.
printf 'func.func @f(%%x: tensor<2xf32>) -> tensor<2xf32> {\n  %%y = linalg.copy ins(%%x : tensor<2xf32>) outs(%%x : tensor<2xf32>) -> tensor<2xf32>\n  return %%y : tensor<2xf32>\n}\n' > "$WORK/linalg.mlir"
if "$C" "$WORK/linalg.mlir" 'builtin.module(megatron-pipeline{tp=2})' > /dev/null 2> "$WORK/err.txt"; then
  fail "embed-c accepted a linalg program"
fi
grep -qF "linalg.mlir\":2:8): error: 'linalg.copy' is not part of a program tp-megatron-annotate takes" "$WORK/err.txt" ||
  { cat "$WORK/err.txt"; fail "embed-c's error is not located"; }
if "$C" "$WORK/tiny.mlir" 'builtin.module(megatron-pipeline{tp=2})' "$WORK/steps/none.so" 2> "$WORK/err.txt"; then
  fail "embed-c wrote a library of an unlowered module"
fi
grep -q "error: the module has no 'tp.step': run tp-step-manifest" "$WORK/err.txt" ||
  { cat "$WORK/err.txt"; fail "embed-c's missing-manifest error"; }
# A tp.step that tp-step-manifest did not write: each flaw named.
while IFS='|' read -r step expected; do
  echo "module attributes {tp.step = {$step}} {}" > "$WORK/bad-step.mlir"
  if "$C" "$WORK/bad-step.mlir" 'builtin.module()' "$WORK/steps/bad.so" 2> "$WORK/err.txt"; then
    fail "embed-c wrote a library from tp.step {$step}"
  fi
  grep -qF "$expected" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "tp.step {$step}: no '$expected'"; }
done <<'STEPS'
target = "cpu"|error: 'tp.step' has no valid 'manifest' field: it is what tp-step-manifest records
manifest = "{}", target = "tpu", entries = []|error: unknown target 'tpu' in 'tp.step'
manifest = "{}", target = "cpu", entries = [1]|error: 'tp.step' entries must be dictionaries
manifest = "{}", target = "cpu", entries = [{kind = "backward", function = "f", arguments = array<i32>}]|error: unknown entry kind 'backward'
STEPS

# The README's Embedding section: its commands as written, its snippets
# from the examples.
python3 utils/readme_embedding.py README.md --check-snippets examples
mkdir -p "$WORK/readme"
ln -s "$ROOT/build" "$WORK/readme/build"
ln -s "$ROOT/examples" "$WORK/readme/examples"
cp "$WORK/tiny.mlir" "$WORK/readme/gpt2.mlir"
(cd "$WORK/readme" &&
  bash -euo pipefail -c "$(python3 "$ROOT/utils/readme_embedding.py" "$ROOT/README.md" --commands)") \
  > "$WORK/readme.txt" || fail "the README's Embedding commands failed"
grep -q "tp.partitioned" "$WORK/readme.txt" || fail "the README's commands printed no per-rank program"
echo "check-install: the installed tree, both examples and the README's Embedding commands work"
