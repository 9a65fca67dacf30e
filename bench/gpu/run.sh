#!/usr/bin/env bash
# The GPU benchmark of megatron-mlir, run ON the GPU machine from the
# repository root, with the bundle that bench/gpu/prepare.sh made:
#
#   OUT=out-gpu bash bench/gpu/run.sh
#
# Stages (each its own process under a time limit; a failing or timed-out
# stage is recorded and the next one runs; the whole run keeps within
# BUDGET_S seconds, skipping what no longer fits):
#   setup          unpack the bundle, find the CUDA libraries it leaves to
#                  this machine, write the megatron-run wrapper, ldd check
#   launcher       megatron-run on the mock step (launcher + MPI stub, no GPU)
#   gpu_info       nvidia-smi snapshot -> $OUT/nvidia-smi.txt
#   correctness    GPT-2 tiny, TP=1, 10 training steps on our GPU step; per-step
#                  loss vs the CPU reference log (the same bf16 mixed-
#                  precision program on the CPU target), within 2e-2 relative;
#                  then, as a diagnostic that does not decide the stage, the
#                  fp32 step (fp32 GEMMs) against the fp32 CPU log within
#                  RTOL_FP32: a bf16 failure with an fp32 pass is bf16's
#   peak           bf16 matmul peak with PyTorch (peak_matmul.py)
#   ours           GPT-2 124M training, B=16 (else the next batch the bundle
#                  has), T=1024, our step: megatron-run --log gives ms per step
#   torch_eager    the same model in PyTorch, eager, bf16 autocast, fused AdamW
#   torch_compile  the same with torch.compile
#   decode         GPT-2 124M greedy decoding at batch 1 and 8: our
#                  generation step beside PyTorch eager with a KV cache on
#                  the card (bench/cpu/decode_compare.py --device cuda),
#                  decode tokens/s and whether both chose the same tokens
#   sanitizer      compute-sanitizer (memcheck) on 2 steps of tiny, if present
#   kernels        our runtime's attention, GEMMs and layer norm beside
#                  PyTorch's on the timed model's shapes (kernels.py):
#                  agreement and time per call, to say which piece lags
#   profile        nsys per-kernel times of 4 steps of our 124M step, if present
#   results        $OUT/results.json and $OUT/results.md
#
# What comes out in $OUT (at most 8 files come back from the device tool):
# run.log (everything printed), nvidia-smi.txt, results.json, results.md and
# detail.tar.gz (every stage's log and JSON, re-packed after each stage).
#
# Environment: BUNDLE (default bench/gpu/bundle), OUT (./out-gpu), WORK
# (scratch, default /tmp/megatron-gpu-bench: emptied first), PYTHON
# (python3), BUDGET_S (540), SKIP_STAGES ("torch_compile sanitizer" ...),
# MATMUL_SIZES (8192,16384), SANITIZER_TOOL (memcheck), RTOL (2e-2),
# RTOL_FP32 (2e-3: attention's products stay bf16 on tensor cores).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/run.sh
export BUNDLE=${BUNDLE:-$HERE/bundle}
export OUT=${OUT:-./out-gpu}
export WORK=${WORK:-${TMPDIR:-/tmp}/megatron-gpu-bench}
export PYTHON=${PYTHON:-python3}
export BUDGET_S=${BUDGET_S:-540}
export SKIP_STAGES=${SKIP_STAGES:-}
export MATMUL_SIZES=${MATMUL_SIZES:-8192,16384}
export SANITIZER_TOOL=${SANITIZER_TOOL:-memcheck}
export RTOL=${RTOL:-2e-2}
export RTOL_FP32=${RTOL_FP32:-2e-3}
BDIR=$WORK/bundle            # the unpacked bundle
LOGS=$WORK/logs
RESERVE_S=25                 # kept back for the results stage
MIN_STAGE_S=20               # a stage with less time than this is skipped

# ==========================================================================
# helpers (stage processes)
# ==========================================================================
say() { echo "[$STAGE] $*"; }

# Prints a command, then runs it.
run_cmd() {
  echo "+ $*"
  "$@"
}

# Ends the stage as skipped, with the reason recorded.
skip() {
  echo "$*" >"$LOGS/$STAGE.skip"
  say "SKIPPED: $*"
  exit 3
}

train_flags() {
  echo "--seed $SEED --lr $LR --beta1 $BETA1 --beta2 $BETA2 --eps $EPS" \
    "--weight-decay $WEIGHT_DECAY --grad-clip $GRAD_CLIP"
}

peak_tflops() {
  "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_tflops"])' \
    "$WORK/peak.json" 2>/dev/null || true
}

load_env() {
  # shellcheck source=/dev/null
  source "$BDIR/bundle.env"
  # shellcheck source=/dev/null
  [[ -f $WORK/env.sh ]] && source "$WORK/env.sh"
  return 0
}

# ==========================================================================
# stages
# ==========================================================================
stage_setup() {
  [[ -f $BUNDLE/payload.tar.xz ]] || skip "no bundle at $BUNDLE (run bench/gpu/prepare.sh where the project is built)"
  say "unpacking $BUNDLE into $BDIR"
  mkdir -p "$BDIR"
  cp -r "$BUNDLE/data" "$BUNDLE/ref" "$BUNDLE/bundle.env" "$BUNDLE/MANIFEST.json" "$BDIR/"
  # Python's tarfile rather than tar -J: xz may be missing, python3 is not.
  "$PYTHON" -c 'import sys, tarfile
kw = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
tarfile.open(sys.argv[1]).extractall(sys.argv[2], **kw)' \
    "$BUNDLE/payload.tar.xz" "$BDIR"
  load_env
  [[ $TARGET == cuda ]] || say "WARNING: a --target=$TARGET smoke-test bundle: the 'GPU' steps run on the CPU"
  local libpath=$BDIR/lib extra
  extra=$(external_lib_dirs)
  [[ -n $extra ]] && libpath+=":$extra"
  mkdir -p "$WORK/bin"
  # The wrapper puts the bundle's libraries first for megatron-run alone (the
  # bundle's libstdc++ etc. must not leak into PyTorch's processes).
  cat >"$WORK/bin/megatron-run" <<EOF
#!/bin/sh
export LD_LIBRARY_PATH="$libpath\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "$BDIR/bin/megatron-run" "\$@"
EOF
  chmod +x "$WORK/bin/megatron-run"
  cat >"$WORK/env.sh" <<EOF
MRUN="$WORK/bin/megatron-run"
MRUN_LIBPATH="$libpath"
EOF
  say "LD_LIBRARY_PATH for megatron-run: $libpath"
  say "ldd check (megatron-run, steps, runtimes):"
  local missing
  missing=$(LD_LIBRARY_PATH="$libpath:${LD_LIBRARY_PATH:-}" ldd "$BDIR/bin/megatron-run" \
              "$BDIR"/steps/*.so "$BDIR"/lib/libmegatron_rt*.so 2>&1 |
              grep -E "^/|not found|cuda|cublas|nccl|libmpi|megatron" || true)
  echo "$missing"
  if grep -q "not found" <<<"$missing"; then
    say "WARNING: unresolved libraries above: the steps that need them will fail"
  fi
  say "host: $(uname -srm); $(ldd --version 2>&1 | head -1)"
  "$PYTHON" -c 'import sys, torch; print("[setup] python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' ||
    say "WARNING: PyTorch not importable with $PYTHON"
}

# Folders holding the CUDA libraries the bundle leaves to this machine
# (EXTERNAL_LIBS, and libcuda.so.1 if the loader's cache lacks it), from
# PyTorch's nvidia wheels and /usr/local/cuda*; one line, ':'-separated.
external_lib_dirs() {
  local roots=() dirs=() lib dir
  # Only the CUDA wheels' and torch's folders of site-packages (it is large).
  mapfile -t roots < <("$PYTHON" -c 'import site
for p in site.getsitepackages(): print(p + "/nvidia"); print(p + "/torch/lib")' 2>/dev/null || true)
  roots+=(/usr/local/cuda*/lib64 /usr/local/cuda*/lib /usr/local/cuda*/targets/x86_64-linux/lib
          /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu)
  for lib in $EXTERNAL_LIBS libcuda.so.1; do
    if ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$lib "; then
      echo "[setup] $lib: in the loader's cache" >&2
      continue
    fi
    dir=""
    local root
    for root in "${roots[@]}"; do
      [[ -d $root ]] || continue
      dir=$(find "$root" -maxdepth 4 -name "$lib" -printf '%h\n' 2>/dev/null | head -1)
      [[ -n $dir ]] && break
    done
    if [[ -n $dir ]]; then
      echo "[setup] $lib: $dir" >&2
      [[ " ${dirs[*]:-} " == *" $dir "* ]] || dirs+=("$dir")
    else
      echo "[setup] WARNING: $lib not found on this machine" >&2
    fi
  done
  local IFS=:
  echo "${dirs[*]:-}"
}

stage_launcher() {
  say "megatron-run on the mock step (checks the launcher and the MPI stub; no GPU)"
  run_cmd "$MRUN" "$BDIR/$MOCK_STEP" --data "$BDIR/$MOCK_DATA" --steps 2 --log "$WORK/mock.jsonl"
}

stage_gpu_info() {
  command -v nvidia-smi >/dev/null || skip "nvidia-smi not found"
  nvidia-smi | tee "$OUT/nvidia-smi.txt"
  nvidia-smi -q >"$WORK/nvidia-smi-q.txt" 2>&1 || true
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
    --format=csv,noheader >"$WORK/gpu.csv"
  "$PYTHON" - "$WORK/gpu.csv" "$WORK/gpu.json" <<'EOF'
import json, sys
fields = ["name", "driver_version", "memory_total", "clocks_max_sm", "power_limit"]
line = open(sys.argv[1]).readline().strip()
json.dump(dict(zip(fields, [v.strip() for v in line.split(",")])), open(sys.argv[2], "w"))
EOF
}

# check_tiny STEP REF RTOL NAME: STEP's tiny run ($WORK/tiny_NAME.jsonl)
# against the CPU log REF, judged in $WORK/NAME.json; the exit status says
# whether it passed.
check_tiny() {
  local rc=0
  # shellcheck disable=SC2046  # train_flags is a list of flags
  run_cmd "$MRUN" "$BDIR/$1" --data "$BDIR/$TINY_DATA" --steps "$TINY_STEPS" \
    $(train_flags) --log "$WORK/tiny_$4.jsonl" || rc=$?
  ((rc == 0)) || say "megatron-run failed (exit $rc); the verdict records it"
  run_cmd "$PYTHON" "$HERE/report.py" verdict --ref "$BDIR/$2" --got "$WORK/tiny_$4.jsonl" \
    --rtol "$3" --out "$WORK/$4.json" || rc=$?
  return "$rc"
}

stage_correctness() {
  say "GPT-2 tiny, TP=1, $TINY_STEPS training steps on our GPU step vs the CPU reference"
  local rc=0
  check_tiny "$TINY_STEP" "$REF_LOG" "$RTOL" verdict || rc=$?
  say "diagnostic: the fp32 step with fp32 GEMMs vs the fp32 CPU reference"
  MEGATRON_CUDA_MATMUL=fp32 check_tiny "$TINY_STEP_FP32" "$REF_LOG_FP32" "$RTOL_FP32" \
    verdict_fp32 || say "the fp32 diagnostic did not pass (recorded in results)"
  return "$rc"
}

stage_peak() {
  run_cmd "$PYTHON" "$HERE/peak_matmul.py" --sizes "$MATMUL_SIZES" --dtype bf16 \
    --json-out "$WORK/peak.json"
}

# Appends the device's used memory (MiB) to FILE every 0.5 s until killed:
# megatron-run reports no memory figure of its own.
sample_gpu_memory() {
  while nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >>"$1" 2>/dev/null; do
    sleep 0.5
  done
}

stage_ours() {
  local entry batch step rc=1 sampler="" mem=()
  for entry in $TIMING_STEPS_LIST; do
    batch=${entry%%:*}
    step=${entry#*:}
    say "GPT-2 $TIMING_PRESET, B=$batch, T=$TIMING_SEQ: $TIMING_WARMUP warm-up + $TIMING_STEPS timed steps"
    rm -f "$WORK/ours.jsonl" "$WORK/ours_mem.txt"
    if command -v nvidia-smi >/dev/null; then
      mem=(--mem-base "$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)"
           --mem-samples "$WORK/ours_mem.txt")
      sample_gpu_memory "$WORK/ours_mem.txt" &
      sampler=$!
    fi
    # shellcheck disable=SC2046
    run_cmd "$MRUN" "$BDIR/$step" --data "$BDIR/$TIMING_DATA" \
      --steps $((TIMING_WARMUP + TIMING_STEPS)) $(train_flags) --log "$WORK/ours.jsonl" && rc=0
    [[ -z $sampler ]] || kill "$sampler" 2>/dev/null || true
    ((rc == 0)) && break
    say "B=$batch failed; trying the next batch size the bundle has"
  done
  ((rc == 0)) || return 1
  echo "$batch" >"$WORK/ours_batch"
  run_cmd "$PYTHON" "$HERE/report.py" ours --log "$WORK/ours.jsonl" --preset "$TIMING_PRESET" \
    --batch "$batch" --seq "$TIMING_SEQ" --vocab-rows "$TIMING_VOCAB_ROWS" \
    --warmup "$TIMING_WARMUP" --step "$step" --peak-json "$WORK/peak.json" "${mem[@]}" \
    --out "$WORK/ours.json"
}

# torch_run NAME [flags]: PyTorch on the batch our step ran (else the first).
torch_run() {
  local name=$1 batch peak
  shift
  if [[ -f $WORK/ours_batch ]]; then
    batch=$(cat "$WORK/ours_batch")
  else
    batch=${TIMING_STEPS_LIST%%:*}
  fi
  peak=$(peak_tflops)
  export TORCHINDUCTOR_CACHE_DIR=$WORK/cache/inductor TRITON_CACHE_DIR=$WORK/cache/triton
  # shellcheck disable=SC2046
  run_cmd "$PYTHON" "$HERE/torch_gpt2.py" --preset "$TIMING_PRESET" \
    --vocab-rows "$TIMING_VOCAB_ROWS" --batch "$batch" --seq "$TIMING_SEQ" \
    --steps "$TIMING_STEPS" --warmup "$TIMING_WARMUP" --dtype bf16 \
    --data "$BDIR/$TIMING_DATA" $(train_flags) ${peak:+--peak-tflops "$peak"} \
    --json-out "$WORK/$name.json" "$@"
}

stage_decode() {
  [[ -d $BDIR/steps/decode ]] || skip "the bundle has no generation steps"
  run_cmd "$PYTHON" "$HERE/../cpu/decode_compare.py" --device cuda --tps 1 \
    --batches 1,8 --prompt 32 --prebuilt "$BDIR/steps/decode" --megatron-run "$MRUN" \
    --keep "${TMPDIR:-/tmp}/megatron-decode" --json "$WORK/decode.json"
}

stage_torch_eager() { torch_run torch_eager; }
stage_torch_compile() { torch_run torch_compile --compile; }

# compute-sanitizer from PATH, the CUDA toolkits, or the nvidia pip wheel.
find_sanitizer() {
  local c
  for c in "$(command -v compute-sanitizer 2>/dev/null || true)" \
           /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer \
           /opt/nvidia/*/compute-sanitizer /opt/nvidia/compute-sanitizer*/compute-sanitizer; do
    [[ -n $c && -x $c ]] && { echo "$c"; return 0; }
  done
  return 1
}

stage_sanitizer() {
  local san rc=0
  san=$(find_sanitizer) ||
    skip "compute-sanitizer not found (PATH, /usr/local/cuda*/bin, /usr/local/cuda*/compute-sanitizer, /opt/nvidia)"
  [[ $TARGET == cuda ]] || skip "the bundle's steps are not CUDA steps"
  say "$san --tool $SANITIZER_TOOL on 2 steps of GPT-2 tiny"
  # shellcheck disable=SC2046
  run_cmd "$san" --tool "$SANITIZER_TOOL" --target-processes all --error-exitcode 42 \
    --print-limit 50 "$MRUN" "$BDIR/$TINY_STEP" --data "$BDIR/$TINY_DATA" --steps 2 \
    $(train_flags) --log "$WORK/sanitizer_run.jsonl" >"$WORK/sanitizer.log" 2>&1 || rc=$?
  tail -n 30 "$WORK/sanitizer.log"
  run_cmd "$PYTHON" "$HERE/report.py" sanitizer --log "$WORK/sanitizer.log" --rc "$rc" \
    --tool "$SANITIZER_TOOL" --out "$WORK/sanitizer.json"
}

stage_kernels() {
  [[ $TARGET == cuda ]] || skip "the bundle's runtime is the CPU one"
  local batch
  batch=$(cat "$WORK/ours_batch" 2>/dev/null || echo "${TIMING_STEPS_LIST%%:*}")
  run_cmd "$PYTHON" "$HERE/kernels.py" --lib "$BDIR/lib/libmegatron_rt_cuda.so" \
    --lib-path "$MRUN_LIBPATH" --preset "$TIMING_PRESET" --batch "$batch" \
    --seq "$TIMING_SEQ" --vocab-rows "$TIMING_VOCAB_ROWS" --out "$WORK/kernels.json"
}

# nsys from PATH or the toolkits: the per-kernel time of our step, so the
# run that measures the gap also says where the time goes.
find_nsys() {
  local c
  for c in "$(command -v nsys 2>/dev/null || true)" /usr/local/cuda*/bin/nsys \
           /opt/nvidia/nsight-systems*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys; do
    [[ -n $c && -x $c ]] && { echo "$c"; return 0; }
  done
  return 1
}

stage_profile() {
  local nsys batch step entry
  nsys=$(find_nsys) || skip "nsys not found (PATH, /usr/local/cuda*/bin, /opt/nvidia/nsight-systems*)"
  [[ $TARGET == cuda ]] || skip "the bundle's steps are not CUDA steps"
  batch=$(cat "$WORK/ours_batch" 2>/dev/null) || skip "the ours stage did not run a step"
  for entry in $TIMING_STEPS_LIST; do
    [[ ${entry%%:*} == "$batch" ]] && step=${entry#*:}
  done
  say "$nsys on 4 steps of GPT-2 $TIMING_PRESET, B=$batch: kernel time summary"
  # shellcheck disable=SC2046
  run_cmd "$nsys" profile --stats=false --force-overwrite true -o "$WORK/profile" \
    "$MRUN" "$BDIR/$step" --data "$BDIR/$TIMING_DATA" --steps 4 $(train_flags) \
    --log "$WORK/profile_run.jsonl" >"$WORK/profile.log" 2>&1
  run_cmd "$nsys" stats --report cuda_gpu_kern_sum --format csv \
    --output "$WORK/profile" "$WORK/profile.nsys-rep" >>"$WORK/profile.log" 2>&1
  rm -f "$WORK/profile.nsys-rep" "$WORK/profile.sqlite"
  head -n 25 "$WORK"/profile_cuda_gpu_kern_sum.csv 2>/dev/null || tail -n 20 "$WORK/profile.log"
}

stage_results() {
  run_cmd "$PYTHON" "$HERE/report.py" results --work "$WORK" --out-dir "$OUT"
}

# ==========================================================================
# driver
# ==========================================================================
json_escape() {
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  printf '%s' "${s//$'\n'/ }"
}

record() {  # record STAGE STATUS RC SECONDS NOTE
  printf '{"stage":"%s","status":"%s","rc":%s,"seconds":%s,"note":"%s"}\n' \
    "$1" "$2" "$3" "$4" "$(json_escape "$5")" >>"$WORK/stages.jsonl"
  echo "=== [$1] $2 (rc $3, ${4}s)${5:+: $5}"
}

# Everything but the unpacked bundle and the compiler caches.
archive() {
  if tar -C "$WORK" --exclude=./bundle --exclude=./cache -czf "$OUT/detail.tar.gz.tmp" .; then
    mv "$OUT/detail.tar.gz.tmp" "$OUT/detail.tar.gz"
  fi
}

run_stage() {  # run_stage NAME WANT_SECONDS [always]
  local name=$1 want=$2 always=${3:-} left limit=$2 rc t0=$SECONDS note=""
  if [[ " $SKIP_STAGES " == *" $name "* ]]; then
    record "$name" skipped 0 0 "in SKIP_STAGES"
    return 0
  fi
  # The results stage always runs, on the time RESERVE_S kept for it.
  if [[ -z $always ]]; then
    left=$((BUDGET_S - SECONDS - RESERVE_S))
    if ((left < MIN_STAGE_S)); then
      record "$name" skipped 0 0 "time budget BUDGET_S=$BUDGET_S used up"
      return 0
    fi
    limit=$((want < left ? want : left))
  fi
  echo
  echo "=== [$name] start: limit ${limit}s ($((BUDGET_S - SECONDS))s of the budget left)"
  set +e
  STAGE=$name timeout -k 10 "$limit" bash "$SELF" --stage "$name" 2>&1 | tee "$LOGS/$name.log"
  rc=${PIPESTATUS[0]}
  set -e
  case $rc in
    0) record "$name" ok 0 $((SECONDS - t0)) "" ;;
    3) record "$name" skipped 3 $((SECONDS - t0)) "$(cat "$LOGS/$name.skip" 2>/dev/null)" ;;
    124|137) record "$name" timeout "$rc" $((SECONDS - t0)) "stopped after ${limit}s" ;;
    *) note=$(grep -v '^+ ' "$LOGS/$name.log" | tail -n 3 | cut -c1-300)
       record "$name" failed "$rc" $((SECONDS - t0)) "$note" ;;
  esac
  archive
}

stage_main() {
  STAGE=$1
  export STAGE
  if [[ $STAGE != setup ]]; then
    [[ -f $WORK/env.sh ]] || skip "setup did not finish"
    load_env
  fi
  "stage_$STAGE"
}

main() {
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  export OUT
  rm -rf "${WORK:?}"
  mkdir -p "$WORK" "$LOGS"
  exec > >(tee -a "$OUT/run.log") 2>&1
  echo "megatron-mlir GPU benchmark: bundle $BUNDLE, out $OUT, work $WORK, budget ${BUDGET_S}s, $(date -u +%FT%TZ)"
  run_stage setup 90
  run_stage launcher 30
  run_stage gpu_info 30
  run_stage correctness 90
  run_stage peak 90
  run_stage ours 200
  run_stage torch_eager 120
  run_stage torch_compile 300
  run_stage decode 90
  run_stage sanitizer 150
  run_stage kernels 90
  run_stage profile 90
  run_stage results 30 always
  echo
  echo "stages:"
  cat "$WORK/stages.jsonl"
  echo "files in $OUT: $(cd "$OUT" && echo *)"
  ! grep -q '"status":"\(failed\|timeout\)"' "$WORK/stages.jsonl"
}

if [[ ${1:-} == --stage ]]; then
  stage_main "$2"
else
  main "$@"
fi
