#!/usr/bin/env bash
# Builds the GPU benchmark's bundle on THIS machine (no GPU needed), after
# the project is built into build/. run.sh then runs it on the GPU machine,
# which has CUDA 13, cuBLAS and PyTorch but no MLIR, no MPI and no network.
#
#   bench/gpu/prepare.sh [--build DIR] [--out DIR] [--target cuda|cpu]
#       [--arch sm_90] [--timing-preset 124M] [--seq 1024] [--batches "16 8"]
#       [--timing-steps 20] [--warmup 3]
#
# The bundle (default bench/gpu/bundle, gitignored; carry it to the GPU
# machine) holds:
#   payload.tar.xz  bin/megatron-run, lib/ (libmegatron_rt*, every non-glibc
#                   shared library they and the steps need, libmpi.so.40 =
#                   the single-rank MPI stub), steps/*.so (compiled here),
#                   steps/mock_step_tp1.so (launcher self-test). Compressed:
#                   oneDNN and OpenBLAS are 76 MB; the carry limit is 64 MiB.
#   data/           token files (llm.c format): tiny (correctness) and the
#                   timing model's; mock tokens for the self-test
#   ref/            tiny_cpu.jsonl: megatron-run --log of GPT-2 tiny, TP=1,
#                   10 steps, --target=cpu step in the same bf16 mixed
#                   precision, same seed/data/hyperparameters as the GPU
#                   run (and its stdout); tiny_cpu_fp32.jsonl the same in
#                   fp32, for the fp32 GPU step that tells a bf16 problem
#                   from any other
#   bundle.env      the settings run.sh sources (one source of truth for the
#                   hyperparameters, step files, external libraries)
#   MANIFEST.json   files with sizes and sha256, and the commands used
#
# Not in the bundle, on purpose: weights (megatron-run initialises them from
# --seed on the GPU machine), libcuda.so.1 (the driver's), and the CUDA
# libraries too large to carry (cuBLAS/cuBLASLt are ~600 MB): those are
# listed in bundle.env as EXTERNAL_LIBS and run.sh finds them there.
#
# --target cpu builds a smoke-test bundle whose "GPU" steps are CPU steps, to
# exercise run.sh on a machine without a GPU (use a small --timing-preset).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

BUILD=$ROOT/build
OUT_DIR=$HERE/bundle
TARGET=cuda
ARCH=sm_90
TIMING_PRESET=124M
TIMING_SEQ=1024
TIMING_BATCHES="16 8"      # largest first; run.sh uses the first that runs
TIMING_STEPS=20            # timed steps
TIMING_WARMUP=3            # untimed steps before them
MAX_BUNDLE_MB=48           # the device tool carries at most 64 MiB in all

# Training hyperparameters of every run (correctness and timing, ours and
# PyTorch): AdamW lr 3e-4, betas 0.9/0.999, eps 1e-8, weight decay 0.1 on
# 2-D weights, global-norm clipping at 1.0, constant lr; seeded GPT-2 init.
SEED=1337
LR=3e-4
BETA1=0.9
BETA2=0.999
EPS=1e-8
WEIGHT_DECAY=0.1
GRAD_CLIP=1.0
TINY_STEPS=10
DATA_SEED=0
# Every step, GPU and CPU reference alike: bf16 activations and parameter
# copies, fp32 master weights and AdamW state (llm.c's and autocast's).
PRECISION=bf16

usage() { sed -n '2,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

parse_args() {
  while [[ $# -gt 0 ]]; do
    case $1 in
      --build) BUILD=$2; shift 2 ;;
      --out) OUT_DIR=$2; shift 2 ;;
      --target) TARGET=$2; shift 2 ;;
      --arch) ARCH=$2; shift 2 ;;
      --timing-preset) TIMING_PRESET=$2; shift 2 ;;
      --seq) TIMING_SEQ=$2; shift 2 ;;
      --batches) TIMING_BATCHES=$2; shift 2 ;;
      --timing-steps) TIMING_STEPS=$2; shift 2 ;;
      --warmup) TIMING_WARMUP=$2; shift 2 ;;
      -h|--help) usage 0 ;;
      *) echo "prepare.sh: unknown option $1" >&2; usage 2 ;;
    esac
  done
  case $TARGET in cuda|cpu) ;; *) die "--target must be cuda or cpu" ;; esac
}

die() { echo "prepare.sh: error: $*" >&2; exit 1; }
say() { echo "prepare.sh: $*"; }

# Runs a command after printing it, and records it for MANIFEST.json.
run_logged() {
  echo "+ $*"
  printf '%s\n' "$*" >>"$STAGE/commands.txt"
  "$@"
}

check_tools() {
  BIN=$BUILD/bin
  for tool in gpt2-mlir megatron-compile megatron-run; do
    [[ -x $BIN/$tool ]] || die "$BIN/$tool not found: build the project first"
  done
  command -v cc >/dev/null || die "no C compiler (cc) for the MPI stub"
  command -v python3 >/dev/null || die "python3 needed (token files, manifests)"
  command -v xz >/dev/null || die "xz needed to compress the payload"
  if [[ $TARGET == cuda ]]; then
    "$BIN/megatron-compile" --help | grep -q -- '--arch' ||
      die "megatron-compile has no --arch option: is the CUDA target built?"
    [[ -f $BUILD/lib/libmegatron_rt_cuda.so ]] ||
      die "$BUILD/lib/libmegatron_rt_cuda.so not found: build the CUDA runtime first"
  fi
}

# --------------------------------------------------------------------------
# steps
# --------------------------------------------------------------------------
target_flags() {
  if [[ $TARGET == cuda ]]; then
    echo "--target=cuda --arch=$ARCH"
  else
    echo "--target=cpu"
  fi
}

# compile IR OUT.so [PRECISION]: a TP=1 training step for the bundle's target
compile_step() {
  local ir=$1 out=$2 precision=${3:-$PRECISION}
  # shellcheck disable=SC2046  # target_flags is a list of flags
  run_logged "$BIN/megatron-compile" "$ir" --tp=1 $(target_flags) \
    --precision="$precision" --train -o "$out"
}

# compile IR OUT.so PRECISION: the CPU reference step (run here only).
compile_reference_step() {
  run_logged "$BIN/megatron-compile" "$1" --tp=1 --target=cpu --precision="$3" \
    --train -o "$2"
}

# The step's manifest (JSON) on stdout; the CPU target's if the bundle's
# target cannot emit one (the manifest does not depend on the target).
manifest_of() {
  local ir=$1
  # shellcheck disable=SC2046
  "$BIN/megatron-compile" "$ir" --tp=1 $(target_flags) --train --emit=manifest -o - 2>/dev/null ||
    "$BIN/megatron-compile" "$ir" --tp=1 --target=cpu --train --emit=manifest -o -
}

# Field of a manifest: vocab_rows (wte's global rows), valid_vocab, batch, seq.
manifest_field() {
  python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
if sys.argv[2] == "vocab_rows":
    print(next(a for a in m["args"] if a["name"] == "wte.weight")["global_shape"][0])
else:
    print(m[sys.argv[2]])' "$1" "$2"
}

build_steps() {
  mkdir -p "$STAGE/steps" "$TMP/ir"
  say "IR and steps ($TARGET)"
  run_logged "$BIN/gpt2-mlir" --preset=tiny -o "$TMP/ir/tiny.mlir"
  compile_step "$TMP/ir/tiny.mlir" "$STAGE/steps/gpt2-tiny-train.so"
  compile_step "$TMP/ir/tiny.mlir" "$STAGE/steps/gpt2-tiny-train-fp32.so" fp32
  manifest_of "$TMP/ir/tiny.mlir" >"$TMP/tiny.manifest.json"
  compile_reference_step "$TMP/ir/tiny.mlir" "$TMP/tiny-cpu.so" "$PRECISION"
  compile_reference_step "$TMP/ir/tiny.mlir" "$TMP/tiny-cpu-fp32.so" fp32

  local b
  for b in $TIMING_BATCHES; do
    local name=gpt2-$TIMING_PRESET-b$b-t$TIMING_SEQ
    run_logged "$BIN/gpt2-mlir" --preset="$TIMING_PRESET" --batch="$b" --seq="$TIMING_SEQ" \
      -o "$TMP/ir/$name.mlir"
    compile_step "$TMP/ir/$name.mlir" "$STAGE/steps/$name-train.so"
    manifest_of "$TMP/ir/$name.mlir" >"$TMP/$name.manifest.json"
  done
  local first
  read -r first _ <<<"$TIMING_BATCHES"
  TIMING_MANIFEST=$TMP/gpt2-$TIMING_PRESET-b$first-t$TIMING_SEQ.manifest.json
  cp "$BUILD/lib/mock_step_tp1.so" "$STAGE/steps/mock_step_tp1.so"
  # The decode stage's generation steps (GPT-2 124M, batch 1 and 8, prompt
  # chunks of 32), on the GPU target only: decode_compare.py runs them.
  if [[ $TARGET == cuda ]]; then
    run_logged python3 "$ROOT/bench/cpu/decode_compare.py" --batches 1,8 --prompt 32 \
      --compile-only "$STAGE/steps/decode"
    rm -f "$STAGE"/steps/decode/*.mlir
  fi
}

# --------------------------------------------------------------------------
# data and the CPU reference
# --------------------------------------------------------------------------
# write_tokens FILE COUNT VOCAB SEED: uniform random tokens, llm.c format.
write_tokens() {
  python3 - "$@" <<'EOF'
import sys
sys.path.insert(0, sys.argv[5])
import numpy as np
import tokens_io
path, count, vocab, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tokens_io.write_tokens(path, np.random.RandomState(seed).randint(0, vocab, size=count))
EOF
}

build_data() {
  mkdir -p "$STAGE/data"
  local ref=$ROOT/utils/gpt2_reference
  local tb ts tv
  tb=$(manifest_field "$TMP/tiny.manifest.json" batch)
  ts=$(manifest_field "$TMP/tiny.manifest.json" seq)
  tv=$(manifest_field "$TMP/tiny.manifest.json" valid_vocab)
  write_tokens "$STAGE/data/tiny_tokens.bin" $((TINY_STEPS * tb * ts + 1)) "$tv" "$DATA_SEED" "$ref"
  local bmax=0 b
  for b in $TIMING_BATCHES; do ((b > bmax)) && bmax=$b; done
  TIMING_VALID_VOCAB=$(manifest_field "$TIMING_MANIFEST" valid_vocab)
  TIMING_VOCAB_ROWS=$(manifest_field "$TIMING_MANIFEST" vocab_rows)
  write_tokens "$STAGE/data/timing_tokens.bin" \
    $(((TIMING_STEPS + TIMING_WARMUP) * bmax * TIMING_SEQ + 1)) "$TIMING_VALID_VOCAB" \
    $((DATA_SEED + 1)) "$ref"
  write_tokens "$STAGE/data/mock_tokens.bin" 100 10 "$DATA_SEED" "$ref"
}

train_flags() {
  echo "--seed $SEED --lr $LR --beta1 $BETA1 --beta2 $BETA2 --eps $EPS" \
    "--weight-decay $WEIGHT_DECAY --grad-clip $GRAD_CLIP"
}

# reference STEP NAME: the CPU step's log as ref/NAME.jsonl (stdout NAME.txt).
reference() {
  say "CPU reference $2: GPT-2 tiny, TP=1, $TINY_STEPS steps"
  # shellcheck disable=SC2046  # train_flags is a list of flags
  run_logged "$BIN/megatron-run" "$1" --data "$STAGE/data/tiny_tokens.bin" \
    --steps "$TINY_STEPS" $(train_flags) --log "$STAGE/ref/$2.jsonl" \
    | tee "$STAGE/ref/$2.txt"
  [[ $(wc -l <"$STAGE/ref/$2.jsonl") -eq $TINY_STEPS ]] ||
    die "the CPU reference log $2 does not have $TINY_STEPS lines"
}

build_reference() {
  mkdir -p "$STAGE/ref"
  reference "$TMP/tiny-cpu.so" tiny_cpu
  reference "$TMP/tiny-cpu-fp32.so" tiny_cpu_fp32
}

# --------------------------------------------------------------------------
# libraries
# --------------------------------------------------------------------------
build_mpi_stub() {
  mkdir -p "$STAGE/lib"
  run_logged cc -O2 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Wl,-soname,libmpi.so.40 \
    -o "$STAGE/lib/libmpi.so.40" "$HERE/mpi_stub.c" -ldl
}

# glibc and the loader: the GPU machine's own must be used.
is_glibc() {
  case $1 in
    linux-vdso.so.*|ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*) return 0 ;;
    libutil.so.*|libresolv.so.*|libanl.so.*|libmvec.so.*|libnsl.so.*|libcrypt.so.*) return 0 ;;
  esac
  return 1
}

# Provided by the GPU machine: the driver (only it may provide libcuda), and
# CUDA libraries too large to carry (cuBLASLt alone is 540 MB). libcudart
# (0.7 MB) is carried: it is the runtime the steps were built against.
is_external() {
  case $1 in
    libcuda.so.*|libnvidia-*|libcublas.so.*|libcublasLt.so.*|libnccl.so.*) return 0 ;;
    libnvrtc*|libnvJitLink.so.*|libcufft*|libcurand.so.*|libcusparse*) return 0 ;;
    libcusolver*|libcudnn*|libcupti.so.*|libnvToolsExt.so.*|libnvtx3interop.so.*) return 0 ;;
  esac
  return 1
}

# ELF files whose dependencies the bundle must satisfy.
bundle_objects() {
  echo "$STAGE/bin/megatron-run"
  find "$STAGE/steps" -name '*.so'
  local lib
  for lib in "$BUILD"/lib/libmegatron_rt*.so; do
    [[ -f $lib ]] && echo "$lib"
  done
  return 0
}

collect_libs() {
  mkdir -p "$STAGE/bin"
  cp "$BIN/megatron-run" "$STAGE/bin/"
  local lib
  # megatron-run may load the runtimes itself (dlopen): ship all of them.
  for lib in "$BUILD"/lib/libmegatron_rt*.so; do
    cp "$lib" "$STAGE/lib/"
  done
  EXTERNAL=()
  local obj name arrow path
  # The stub comes first on the search path, so libmpi's own dependencies
  # (Open MPI's libopen-rte/pal, hwloc, libevent, PMIx) never enter.
  while read -r obj; do
    while read -r name arrow path _; do
      [[ $arrow == "=>" ]] || continue
      is_glibc "$name" && continue
      if is_external "$name"; then
        [[ " ${EXTERNAL[*]} " == *" $name "* ]] || EXTERNAL+=("$name")
        continue
      fi
      [[ $path == "not" ]] && die "$obj needs $name, which is not found here"
      [[ -e $STAGE/lib/$name ]] || cp -L "$path" "$STAGE/lib/$name"
    done < <(LD_LIBRARY_PATH="$STAGE/lib:$BUILD/lib" ldd "$obj")
  done < <(bundle_objects)
  say "copied libraries: $(cd "$STAGE/lib" && echo *)"
  say "left to the GPU machine: libcuda.so.1 (driver) ${EXTERNAL[*]:-}"
}

# Every MPI symbol that a bundled file imports must be defined by the stub.
check_mpi_symbols() {
  local needed defined missing
  needed=$(for f in "$STAGE"/bin/* "$STAGE"/lib/*.so* "$STAGE"/steps/*.so; do
             [[ $f == */libmpi.so.40 ]] && continue
             nm -D --undefined-only "$f" 2>/dev/null | awk '{print $NF}'
           done | grep -E '^(P?MPI_|ompi_)' | sed 's/@.*//' | sort -u || true)
  defined=$(nm -D --defined-only "$STAGE/lib/libmpi.so.40" | awk '{print $NF}' | sort -u)
  missing=$(comm -23 <(echo "$needed") <(echo "$defined") | grep . || true)
  [[ -z $missing ]] || die "the MPI stub lacks: $(echo "$missing" | tr '\n' ' ')(extend bench/gpu/mpi_stub.c)"
  say "MPI symbols used: $(echo "$needed" | tr '\n' ' ')- all in the stub"
}

# --------------------------------------------------------------------------
# bundle files
# --------------------------------------------------------------------------
write_env() {
  local b steps_list=""
  for b in $TIMING_BATCHES; do
    steps_list+="$b:steps/gpt2-$TIMING_PRESET-b$b-t$TIMING_SEQ-train.so "
  done
  cat >"$STAGE/bundle.env" <<EOF
# Written by bench/gpu/prepare.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ); sourced by run.sh.
TARGET=$TARGET
ARCH=$ARCH
PRECISION=$PRECISION
SEED=$SEED
LR=$LR
BETA1=$BETA1
BETA2=$BETA2
EPS=$EPS
WEIGHT_DECAY=$WEIGHT_DECAY
GRAD_CLIP=$GRAD_CLIP
TINY_STEP=steps/gpt2-tiny-train.so
TINY_STEP_FP32=steps/gpt2-tiny-train-fp32.so
TINY_STEPS=$TINY_STEPS
TINY_DATA=data/tiny_tokens.bin
REF_LOG=ref/tiny_cpu.jsonl
REF_LOG_FP32=ref/tiny_cpu_fp32.jsonl
TIMING_PRESET=$TIMING_PRESET
TIMING_SEQ=$TIMING_SEQ
TIMING_STEPS_LIST="${steps_list% }"
TIMING_STEPS=$TIMING_STEPS
TIMING_WARMUP=$TIMING_WARMUP
TIMING_VOCAB_ROWS=$TIMING_VOCAB_ROWS
TIMING_DATA=data/timing_tokens.bin
MOCK_STEP=steps/mock_step_tp1.so
MOCK_DATA=data/mock_tokens.bin
EXTERNAL_LIBS="${EXTERNAL[*]:-}"
EOF
}

write_manifest() {
  python3 - "$STAGE" <<'EOF'
import hashlib, json, os, sys
stage = sys.argv[1]
files = []
for d, _, names in os.walk(stage):
    for n in sorted(names):
        if n == "commands.txt":
            continue
        p = os.path.join(d, n)
        with open(p, "rb") as f:
            files.append({"path": os.path.relpath(p, stage), "bytes": os.path.getsize(p),
                          "sha256": hashlib.sha256(f.read()).hexdigest()})
with open(os.path.join(stage, "commands.txt")) as f:
    commands = f.read().splitlines()
json.dump({"format": "megatron-gpu-bench-bundle", "version": 1, "files": files,
           "commands": commands}, open(os.path.join(stage, "MANIFEST.json"), "w"), indent=1)
EOF
}

# bin/, lib/ and steps/ go into one xz archive (oneDNN and OpenBLAS: 76 MB).
pack_payload() {
  say "compressing bin/ lib/ steps/"
  tar -C "$STAGE" -cf - bin lib steps | xz -T0 -6 >"$STAGE/payload.tar.xz"
  rm -rf "${STAGE:?}/bin" "${STAGE:?}/lib" "${STAGE:?}/steps"
}

finish() {
  local mb
  mb=$(du -sm "$STAGE" | cut -f1)
  ((mb <= MAX_BUNDLE_MB)) || die "bundle is $mb MiB, over $MAX_BUNDLE_MB MiB"
  rm -rf "$OUT_DIR"
  mv "$STAGE" "$OUT_DIR"
  say "bundle ready: $OUT_DIR ($(du -sh "$OUT_DIR" | cut -f1))"
  (cd "$OUT_DIR" && ls -la . data ref)
}

main() {
  parse_args "$@"
  check_tools
  TMP=$(mktemp -d)
  STAGE=$OUT_DIR.tmp
  trap 'rm -rf "$TMP" "$STAGE"' EXIT
  rm -rf "$STAGE"
  mkdir -p "$STAGE"
  : >"$STAGE/commands.txt"
  build_mpi_stub
  build_steps
  build_data
  build_reference
  collect_libs
  check_mpi_symbols
  write_env
  write_manifest
  rm "$STAGE/commands.txt"
  pack_payload
  finish
}

main "$@"
