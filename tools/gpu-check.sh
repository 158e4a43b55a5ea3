#!/usr/bin/env bash
# The prepared runs for a machine with a GPU (DESIGN §8, issues 3 and 18), in phases: each phase
# is one device call of at most 8 minutes, its own build included.
#
#   tools/gpu-check.sh [--phase N] [--dry-run]
#
#   --phase 1 (default)  build aim_kernel_tests, aim-train, aim-infer (-DAIM_SIMT=OFF); the CUDA
#                        kernel tests under AIM_SYNC=1; din (20 steps) and resnet50 (5 steps) tiny
#                        on cuda with own kernels and with the vendor libraries' (AIM_KERNELS);
#                        aim-infer din.
#   --phase 2            build aim-train, aim-infer; every model of `aim-train --list` tiny on
#                        cuda: train, then infer.
#   --phase 3            build aim-train, aim-infer; precision: --precision fp16/bf16 training,
#                        aim-infer fp16/bf16/int8 and --cuda-graph, data parallel (--gpus).
#   --phase 4            build aim-bench; the benchmarks (foundation, op, peak, suite layers,
#                        f16/bf16/int8 ops).
#   --phase 5            full build; compute-sanitizer memcheck of the CUDA kernel tests, ctest -L
#                        cuda and every other test, then each model at its default size (train,
#                        profile with trace and roofline, infer) -- as far as the time allows.
#   --dry-run            on a CPU-only machine (CI, after building build/): prints the phase's plan
#                        (steps, time limits, estimates) and the time estimate (build + steps),
#                        checks that every binary a step runs exists in build/, runs nothing.
#
# Every phase writes $OUT/summary.md (default ./gpu-out): the probe, then a table of step,
# PASS/FAIL/SKIP/TIMEOUT and time, rewritten after every step and on exit (also when a step
# fails, time runs out or the run is killed), and $OUT/log.txt. A step whose binary was not built
# is a FAIL. Steps are capped by the budget AIM_GPU_CHECK_BUDGET_S (default 450 s, from the
# script's start); a step that would start with under 15 s left is a SKIP (out of time).
# Missing Boost.Program_options/GoogleTest/nlohmann-json on the GPU machine: run
# tools/gpu-vendor.sh here first and carry third_party/; libjpeg/libpng are optional; cuDNN and
# NCCL are searched in the CUDA tree and in Python's nvidia-* packages.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dry=0
phase=1
while (($#)); do
  case "$1" in
    --dry-run) dry=1 ;;
    --phase) phase="${2:-}"; shift ;;
    --phase=*) phase="${1#--phase=}" ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (usage: tools/gpu-check.sh [--phase N] [--dry-run])" >&2; exit 2 ;;
  esac
  shift
done
case "$phase" in 1|2|3|4|5) ;; *) echo "gpu-check: --phase takes 1 to 5, got '$phase'" >&2; exit 2 ;; esac

OUT="${OUT:-$root/gpu-out}"
mkdir -p "$OUT"
budget=${AIM_GPU_CHECK_BUDGET_S:-450}
t0=$(date +%s)
summary="$OUT/summary.md"
log="$OUT/log.txt"
: >"$log"
probe=""    # the probe lines of summary.md
results=()  # table rows
running=""  # the step in flight, for a summary written by a kill
est_total=0

left() { echo $((budget - ($(date +%s) - t0))); }
note() { echo "$*" | tee -a "$log"; }

write_summary() {
  {
    echo "# aim GPU check, phase $phase$( ((dry)) && echo ' (dry run)')"
    echo
    printf '%s\n' "$probe"
    echo
    echo "| step | result | time | note |"
    echo "|---|---|---|---|"
    ((${#results[@]})) && printf '%s\n' "${results[@]}"
    [ -n "$running" ] && echo "| $running | INTERRUPTED | | the run ended during this step |"
    echo
    if ((dry)); then
      echo "estimate: ${est_total} s of a ${budget} s budget (build and steps)"
    else
      echo "total $(($(date +%s) - t0)) s of a ${budget} s budget"
    fi
  } >"$summary"
}
on_exit() { write_summary; }
trap on_exit EXIT
child=""   # the step's process, for the TERM trap
on_term() {
  [ -n "$child" ] && kill -TERM "$child" 2>/dev/null
  note "== terminated${running:+ during: $running}"
  exit 143
}
trap on_term TERM INT

record() { results+=("| $1 | $2 | $3 | $4 |"); running=""; write_summary; }

# The first argument under the build dir that is not an executable (a binary that was not built).
missing_bin() {
  local a
  for a in "$@"; do
    [[ "$a" == "$bdir"/* && ! -x "$a" ]] && { echo "$a"; return; }
  done
}

# step NAME LIMIT ESTIMATE CMD...: runs CMD under `timeout`, the limit capped by the time left;
# records PASS/FAIL/TIMEOUT/SKIP and rewrites the summary. Dry run: prints the plan line and
# checks that the binary exists instead.
step() {
  local name="$1" limit="$2" est="$3"
  shift 3
  if ((dry)); then
    est_total=$((est_total + est))
    printf '  %-40s limit %4ss  est %4ss  %s\n' "$name" "$limit" "$est" "$*"
    local miss
    miss=$(missing_bin "$@")
    if [ -n "$miss" ]; then
      record "$name" FAIL "" "dry run: $miss missing"
    else
      record "$name" DRY "" "would run \`$*\` (limit ${limit}s, est ${est}s)"
    fi
    return 0
  fi
  local remain
  remain=$(left)
  if ((remain < 15)); then
    record "$name" SKIP "" "out of time"
    note "== $name: skipped, out of time"
    return 0
  fi
  ((limit > remain - 10)) && limit=$((remain - 10))
  local miss
  miss=$(missing_bin "$@")
  if [ -n "$miss" ]; then
    record "$name" FAIL "" "$miss was not built (see the build step)"
    note "== $name: FAIL, $miss was not built"
    return 0
  fi
  note "== $name (limit ${limit}s): $*"
  running="$name"
  write_summary
  local s rc d
  s=$(date +%s)
  # In the background and waited for, so that a TERM reaches the trap at once (bash runs traps
  # only between commands) and the trap can stop the step.
  timeout "$limit" "$@" >>"$log" 2>&1 &
  child=$!
  wait "$child"
  rc=$?
  child=""
  d=$(($(date +%s) - s))
  if ((rc == 0)); then record "$name" PASS "${d}s" ""
  elif ((rc == 124)); then record "$name" TIMEOUT "${d}s" "limit ${limit}s"
  else record "$name" "FAIL (rc $rc)" "${d}s" "see log.txt"; fi
  note "   -> rc $rc in ${d}s"
}
skip() { record "$1" SKIP "" "$2"; note "== $1: skipped, $2"; }

# ---- probe ----------------------------------------------------------------------------------
export PATH="/usr/local/cuda/bin:$PATH"
probe+="- date: $(date -u +%FT%TZ)"$'\n'
probe+="- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"$'\n'
probe+="- host: $(uname -m), $(nproc) cores"$'\n'
if command -v nvidia-smi >/dev/null; then
  probe+="- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"$'\n'
else
  probe+="- GPU: none (nvidia-smi not found)"$'\n'
fi
probe+="- nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo missing)"

find_lib() {  # find_lib NAME: first libNAME.so* in the CUDA tree or Python's nvidia packages
  local n="$1" p
  for p in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu \
           $(python3 -c 'import site,sys; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    local f
    f=$(find -L "$p/" -maxdepth 5 -name "lib${n}.so*" 2>/dev/null | head -1)
    [ -n "$f" ] && { echo "$f"; return; }
  done
}
cmake_extra=()
for lib in cublas cublasLt cudnn nccl; do
  f=$(find_lib "$lib")
  probe+=$'\n'"- lib${lib}: ${f:-NOT FOUND}"
  if [ -n "$f" ] && [[ "$f" != /usr/local/cuda/* ]]; then
    d=$(dirname "$f")
    case $lib in
      cudnn) cmake_extra+=("-DAIM_CUDNN_LIB=$f" "-DAIM_CUDNN_INCLUDE=$(dirname "$d")/include") ;;
      nccl) cmake_extra+=("-DAIM_NCCL_LIB=$f" "-DAIM_NCCL_INCLUDE=$(dirname "$d")/include") ;;
    esac
  fi
done
for dep in "boost/program_options.hpp" "gtest/gtest.h" "nlohmann/json.hpp" "jpeglib.h" "png.h" \
           "x86_64-linux-gnu/openblas-openmp/cblas.h"; do
  if [ -e "/usr/include/$dep" ]; then probe+=$'\n'"- header $dep: system"
  elif [ -e "$root/third_party" ] && find "$root/third_party" -path "*/${dep}" | grep -q .; then
    probe+=$'\n'"- header $dep: third_party/"
  else probe+=$'\n'"- header $dep: MISSING (parts needing it are not built or refuse at run time)"; fi
done
echo "$probe" | tee -a "$log"
write_summary

# ---- build ----------------------------------------------------------------------------------
# Each phase builds only its targets (a fresh machine starts from nothing; a warm one keeps
# build-gpu/ and rebuilds little). Estimates: configure ~20 s, the library ~150 s on 16 cores.
bdir="$root/build-gpu"
((dry)) && bdir="$root/build"  # the dry run checks the already-built CI tree
case $phase in
  1) targets=(aim_kernel_tests aim-train aim-infer); build_est=200 ;;
  2|3) targets=(aim-train aim-infer); build_est=180 ;;
  4) targets=(aim-bench); build_est=180 ;;
  5) targets=(all); build_est=300 ;;
esac
if ((dry)); then
  echo "phase $phase plan (build dir $bdir; on the GPU machine: build-gpu/):"
  printf '  %-40s limit %4ss  est %4ss  %s\n' "configure + build" 300 "$build_est" \
    "cmake -DAIM_CUDA=ON -DAIM_CUDA_ARCHS=90 -DAIM_SIMT=OFF; cmake --build --target ${targets[*]}"
  est_total=$build_est
  record "configure + build" DRY "" "targets: ${targets[*]} (est ${build_est}s)"
else
  step "configure" 90 20 cmake -S "$root" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DAIM_CUDA=ON -DAIM_CUDA_ARCHS=90 -DAIM_SIMT=OFF -DAIM_PYTHON="$(command -v python3)" \
    ${cmake_extra[@]+"${cmake_extra[@]}"}
  step "build ${targets[*]}" 330 "$build_est" cmake --build "$bdir" -j"$(nproc)" --target "${targets[@]}"
fi
train="$bdir/aim-train"
infer="$bdir/aim-infer"
bench="$bdir/aim-bench"
ktests="$bdir/tests/aim_kernel_tests"

# Model names: the unindented lines of `aim-train --list` (the dry run reads the CPU build's).
models() { "$train" --list 2>/dev/null | awk '/^[a-z]/{print $1}'; }

# ---- phases ---------------------------------------------------------------------------------
phase1() {
  # The kernel tests on the GPU, each launch synchronised (AIM_SYNC=1: an error names its kernel).
  step "kernel tests cuda (AIM_SYNC=1)" 150 90 env AIM_SYNC=1 "$ktests" --gtest_filter='*cuda*'
  # Its coverage table (what ran on the GPU, what was skipped and why) ends its output.
  ((dry)) || sed -n '/^op  *variant  *backend/,$p' "$log" >"$OUT/kernel-coverage.txt" 2>/dev/null
  # Own kernels, then the vendor libraries' (AIM_KERNELS, what --kernels sets: kernels/registry.h).
  for k in own vendor; do
    step "train din tiny ($k kernels)" 45 15 env AIM_KERNELS="$k" "$train" din --device cuda \
      --config size=tiny --steps 20 --progress lines --results "$OUT/smoke.jsonl"
    step "train resnet50 tiny ($k kernels)" 60 25 env AIM_KERNELS="$k" "$train" resnet50 \
      --device cuda --config size=tiny --steps 5 --batch-size 8 --progress lines \
      --results "$OUT/smoke.jsonl"
  done
  step "infer din" 45 15 "$infer" din --device cuda --results "$OUT/smoke.jsonl"
}

phase2() {
  local m ms
  if [ ! -x "$train" ]; then
    record "model sweep" FAIL "" "$train was not built"
  else
    ms=$(models)
    [ -z "$ms" ] && record "model sweep" FAIL "" "aim-train --list printed no model"
    for m in $ms; do
      step "train $m tiny" 45 8 "$train" "$m" --device cuda --steps 20 --config size=tiny \
        --progress lines --results "$OUT/models.jsonl"
      step "infer $m tiny" 45 6 "$infer" "$m" --device cuda --config size=tiny --iters 20 \
        --results "$OUT/models.jsonl"
    done
  fi
}

phase3() {
  # Mixed-precision training, low-precision inference, CUDA graphs (issues 8, 10).
  for p in fp16 bf16; do
    step "train din $p" 60 15 "$train" din --device cuda --steps 200 --batch-size 256 --precision "$p" \
      --eval-every 0 --eval-samples 2000 --progress lines --results "$OUT/precision.jsonl"
    step "train resnet50 $p" 90 25 "$train" resnet50 --device cuda --steps 30 --batch-size 64 \
      --precision "$p" --eval-every 0 --eval-samples 256 --progress lines --results "$OUT/precision.jsonl"
  done
  for p in fp16 bf16 int8; do
    step "infer resnet50 $p" 90 20 "$infer" resnet50 --device cuda --precision "$p" --iters 50 \
      --batch-size 64 --compare-samples 256 --results "$OUT/precision.jsonl"
  done
  step "infer resnet50 cuda-graph" 60 20 "$infer" resnet50 --device cuda --fp16 --cuda-graph \
    --iters 50 --batch-size 16 --compare-samples 0 --results "$OUT/precision.jsonl"
  step "infer din cuda-graph" 60 15 "$infer" din --device cuda --cuda-graph --iters 50 \
    --batch-size 256 --results "$OUT/precision.jsonl"
  for g in "" --cuda-graph; do  # the captured training step against the eager one
    step "train din $g" 60 15 "$train" din --device cuda --steps 200 --batch-size 256 $g \
      --eval-every 0 --eval-samples 2000 --progress lines --results "$OUT/precision.jsonl"
  done
  if [ -x "$infer" ] && "$infer" --list 2>/dev/null | grep -q '^crnn'; then
    step "infer crnn fp16" 60 20 "$infer" crnn --device cuda --fp16 --iters 50 --batch-size 128 \
      --results "$OUT/precision.jsonl"
  fi
  # Data parallel over NCCL with one GPU (issue 9), and on every GPU when the machine has several.
  step "train din --gpus 1" 60 15 "$train" din --device cuda --gpus 1 --config size=tiny --steps 20 \
    --progress lines --results "$OUT/precision.jsonl"
  local ngpu
  ngpu=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
  if [ "${ngpu:-0}" -gt 1 ]; then
    step "train din --gpus $ngpu" 90 30 "$train" din --device cuda --gpus "$ngpu" --steps 100 \
      --batch-size 256 --eval-every 0 --eval-samples 2000 --progress lines --results "$OUT/precision.jsonl"
    step "train resnet50 --gpus $ngpu --sync-bn" 120 45 "$train" resnet50 --device cuda --gpus "$ngpu" \
      --sync-bn --steps 20 --batch-size 32 --eval-every 0 --eval-samples 256 --progress lines \
      --results "$OUT/precision.jsonl"
  fi
}

phase4() {
  step "aim-bench foundation" 120 60 "$bench" foundation --device cuda --results "$OUT/bench.jsonl"
  step "aim-bench op matmul" 60 20 "$bench" op matmul --shape 4096,4096,4096 --device cuda \
    --results "$OUT/bench.jsonl"
  # GPU ceilings (FMA per dtype, tensor-core GEMM, copy/triad) for the rooflines of phase 5
  # (kept when the machine stays warm and $OUT is the same; else phase 5 draws no ceilings).
  step "aim-bench peak" 60 25 "$bench" peak --device cuda --ceilings "$OUT/ceilings-h200.json" \
    --results "$OUT/bench.jsonl"
  # The AI Matrix layer-based shapes on the GPU (3 repetitions: the check, not the speed record).
  step "aim-bench suite layers" 150 60 "$bench" suite layers --device cuda --reps 3 --max-gflop 20 \
    --out "$OUT/layers.csv" --format csv
  # Precision (issue 8): tensor-core GEMM and conv in fp16/bf16, int8 GEMM (dp4a, cuBLASLt).
  local dt
  for dt in f16 bf16; do
    step "aim-bench matmul $dt" 60 15 "$bench" op matmul --shape 4096,4096,4096 --dtype "$dt" \
      --device cuda --results "$OUT/bench.jsonl"
    step "aim-bench conv2d_fwd $dt" 60 15 "$bench" op conv2d_fwd \
      --shape 32,64,56,56,64,3,3,1,1,1,1,0 --dtype "$dt" --device cuda --results "$OUT/bench.jsonl"
  done
  step "aim-bench qlinear int8" 60 15 "$bench" op qlinear --shape 4096,4096,4096,1,0 --dtype f32 \
    --device cuda --results "$OUT/bench.jsonl"
}

phase5() {
  if command -v compute-sanitizer >/dev/null || ((dry)); then
    step "memcheck kernel tests" 150 90 "$(command -v compute-sanitizer || echo compute-sanitizer)" \
      --tool memcheck --error-exitcode 9 "$ktests" --gtest_filter='*cuda*'
  else
    skip "memcheck kernel tests" "compute-sanitizer not found"
  fi
  step "ctest -L cuda" 150 60 ctest --test-dir "$bdir" -L cuda --output-on-failure
  step "ctest (all but simt)" 200 120 ctest --test-dir "$bdir" --output-on-failure -LE 'simt|cuda'
  local m ceil_flag=()
  [ -s "$OUT/ceilings-h200.json" ] && ceil_flag=(--ceilings "$OUT/ceilings-h200.json")
  if [ ! -x "$train" ]; then
    record "models at default size" FAIL "" "$train was not built"
    return
  fi
  # Each model at its default size: the speed figures, a profile, inference at two batch sizes.
  for m in $(models); do
    step "train $m" 90 30 "$train" "$m" --device cuda --steps 100 --batch-size 256 --eval-every 0 \
      --eval-samples 2000 --progress lines --results "$OUT/models.jsonl"
    step "profile $m" 90 30 "$train" "$m" --device cuda --steps 12 --batch-size 256 --eval-every 0 \
      --eval-samples 2000 --progress lines --profile --trace "$OUT/trace-$m.json" \
      --roofline "$OUT/roofline-$m.svg" --nvtx ${ceil_flag[@]+"${ceil_flag[@]}"}
    step "infer $m" 60 20 "$infer" "$m" --device cuda --iters 50 --batch-size 256,1024 \
      --results "$OUT/models.jsonl"
  done
}

"phase$phase"

running=""
write_summary
if ((dry)); then
  ((phase == 5)) && echo "phase 5 runs as far as its budget allows; the steps past it are skipped"
  echo "phase $phase estimate: ${est_total} s (build ${build_est} s + steps) of a ${budget} s budget$( ((est_total > budget)) && echo ' -- OVER BUDGET: the steps at the end will be skipped')"
fi
fail=0
for r in "${results[@]}"; do [[ "$r" == *"| FAIL"* || "$r" == *"| TIMEOUT"* ]] && fail=1; done
((fail)) && note "gpu-check phase $phase: FAIL (see $summary)" || note "gpu-check phase $phase: ok (see $summary)"
exit $fail
