#!/usr/bin/env bash
# The one prepared run for a machine with a GPU (DESIGN §8, issue 3).
#   tools/gpu-check.sh            probe, build for sm_90, run the cuda-labelled tests first, then
#                                 every test, compute-sanitizer memcheck on the kernel tests, the
#                                 benchmarks, and a short train/infer run of every model on cuda.
#   tools/gpu-check.sh --dry-run  the same logic on a CPU-only machine: probes and plans, checks
#                                 that every step's binary exists after a build, runs nothing on a
#                                 GPU (CI runs this).
# Writes summary.md and the logs into $OUT (default ./gpu-out) and stops itself before 9 minutes.
# Missing Boost/GoogleTest/OpenBLAS/nlohmann on the GPU machine: run tools/gpu-vendor.sh first
# here and carry third_party/; cuDNN and NCCL are searched in the CUDA tree and in Python's
# nvidia-* packages.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
OUT="${OUT:-$root/gpu-out}"
mkdir -p "$OUT"
budget=${AIM_GPU_CHECK_BUDGET_S:-520}  # stop well before 9 minutes
t0=$(date +%s)
summary="$OUT/summary.md"
log="$OUT/log.txt"
: >"$log"
results=()

left() { echo $((budget - ($(date +%s) - t0))); }
note() { echo "$*" | tee -a "$log"; }
# step NAME TIMEOUT CMD...: runs with a timeout capped by the time left; records PASS/FAIL/SKIP.
step() {
  local name="$1" limit="$2"
  shift 2
  local remain
  remain=$(left)
  if ((remain < 15)); then
    results+=("| $name | SKIP | out of time |")
    note "== $name: skipped, out of time"
    return
  fi
  ((limit > remain - 10)) && limit=$((remain - 10))
  note "== $name (limit ${limit}s): $*"
  local s=$(date +%s) rc
  if ((dry)) && [ "${AIM_STEP_REAL:-0}" != 1 ]; then
    # The logic is exercised: binaries the step would run must exist in the build.
    if [[ "$1" == */* && ! -x "$1" ]]; then
      results+=("| $name | FAIL | dry run: $1 missing |")
      note "   dry-run: $1 missing"
    else
      results+=("| $name | DRY | would run: \`$*\` |")
      note "   dry-run: not executed"
    fi
    return
  fi
  timeout "$limit" "$@" >>"$log" 2>&1
  rc=$?
  local d=$(($(date +%s) - s))
  if ((rc == 0)); then results+=("| $name | PASS | ${d}s |")
  elif ((rc == 124)); then results+=("| $name | TIMEOUT | ${limit}s |")
  else results+=("| $name | FAIL (rc $rc) | ${d}s, see log.txt |"); fi
  note "   -> rc $rc in ${d}s"
}

# ---- probe ----------------------------------------------------------------------------------
export PATH="/usr/local/cuda/bin:$PATH"
{
  echo "# aim GPU check $( ((dry)) && echo '(dry run)')"
  echo
  echo "- date: $(date -u +%FT%TZ)"
  echo "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- host: $(uname -m), $(nproc) cores"
  if command -v nvidia-smi >/dev/null; then
    echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
  else
    echo "- GPU: none (nvidia-smi not found)"
  fi
  echo "- nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo missing)"
} >"$summary"

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
  echo "- lib${lib}: ${f:-NOT FOUND}" >>"$summary"
  if [ -n "$f" ] && [[ "$f" != /usr/local/cuda/* ]]; then
    d=$(dirname "$f")
    case $lib in
      cudnn) cmake_extra+=("-DAIM_CUDNN_LIB=$f" "-DAIM_CUDNN_INCLUDE=$(dirname "$d")/include") ;;
      nccl) cmake_extra+=("-DAIM_NCCL_LIB=$f" "-DAIM_NCCL_INCLUDE=$(dirname "$d")/include") ;;
    esac
  fi
done
for dep in "boost/program_options.hpp" "gtest/gtest.h" "nlohmann/json.hpp" "x86_64-linux-gnu/openblas-openmp/cblas.h"; do
  if [ -e "/usr/include/$dep" ]; then echo "- header $dep: system" >>"$summary"
  elif [ -e "$root/third_party" ] && find "$root/third_party" -path "*${dep##*/}" | grep -q .; then
    echo "- header $dep: third_party/" >>"$summary"
  else echo "- header $dep: MISSING (parts needing it are not built)" >>"$summary"; fi
done
cat "$summary" | tee -a "$log"

# ---- build ----------------------------------------------------------------------------------
bdir="$root/build-gpu"
((dry)) && bdir="$root/build"  # the dry run checks the already-built CI tree
if ((!dry)); then
  step "configure" 120 cmake -S "$root" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DAIM_CUDA=ON -DAIM_CUDA_ARCHS=90 -DAIM_SIMT=OFF -DAIM_PYTHON="$(command -v python3)" \
    "${cmake_extra[@]}"
  step "build" 300 cmake --build "$bdir" -j"$(nproc)"
fi

# ---- tests ----------------------------------------------------------------------------------
step "ctest -L cuda" 200 ctest --test-dir "$bdir" -L cuda --output-on-failure
step "ctest (all)" 200 ctest --test-dir "$bdir" --output-on-failure -LE simt
if command -v compute-sanitizer >/dev/null || ((dry)); then
  step "memcheck kernel tests" 150 "$(command -v compute-sanitizer || echo compute-sanitizer)" --tool memcheck --error-exitcode 9 \
    "$bdir/tests/aim_kernel_tests" --gtest_filter='*cuda*'
else
  results+=("| memcheck | SKIP | compute-sanitizer not found |")
fi
# The kernel test's coverage table: what ran on the GPU.
if ((!dry)) && [ -x "$bdir/tests/aim_kernel_tests" ]; then
  "$bdir/tests/aim_kernel_tests" --gtest_brief=1 >"$OUT/kernel-coverage.txt" 2>&1 || true
fi

# ---- benchmarks and models (when they exist) ------------------------------------------------
if [ -x "$bdir/aim-bench" ]; then
  step "aim-bench foundation" 120 "$bdir/aim-bench" foundation --device cuda --results "$OUT/bench.jsonl"
  step "aim-bench op matmul" 60 "$bdir/aim-bench" op matmul --shape 4096,4096,4096 --device cuda --results "$OUT/bench.jsonl"
  # GPU ceilings (FMA per dtype, tensor-core GEMM, copy/triad) for the roofline of the profile steps.
  step "aim-bench peak" 60 "$bdir/aim-bench" peak --device cuda --ceilings "$OUT/ceilings-h200.json" --results "$OUT/bench.jsonl"
  # The AI Matrix layer-based shapes on the GPU (3 repetitions: the check, not the speed record).
  step "aim-bench suite layers" 150 "$bdir/aim-bench" suite layers --device cuda --reps 3 --max-gflop 20 --out "$OUT/layers.csv" --format csv
  # Precision (issue 8): tensor-core GEMM and conv in fp16/bf16, int8 GEMM/conv (dp4a, cuBLASLt).
  for dt in f16 bf16; do
    step "aim-bench matmul $dt" 60 "$bdir/aim-bench" op matmul --shape 4096,4096,4096 --dtype "$dt" --device cuda --results "$OUT/bench.jsonl"
    step "aim-bench conv2d_fwd $dt" 60 "$bdir/aim-bench" op conv2d_fwd --shape 32,64,56,56,64,3,3,1,1,1,1,0 --dtype "$dt" --device cuda --results "$OUT/bench.jsonl"
  done
  step "aim-bench qlinear int8" 60 "$bdir/aim-bench" op qlinear --shape 4096,4096,4096,1,0 --dtype f32 --device cuda --results "$OUT/bench.jsonl"
else
  results+=("| aim-bench | SKIP | not built yet |")
fi
# Mixed-precision training, low-precision inference, CUDA graphs on the GPU (issue 8, 10).
if [ -x "$bdir/aim-infer" ]; then
  for p in fp16 bf16; do
    step "train din $p" 60 "$bdir/aim-train" din --device cuda --steps 200 --batch-size 256 --precision "$p" --eval-every 0 --eval-samples 2000 --progress lines --results "$OUT/precision.jsonl"
    step "train resnet50 $p" 90 "$bdir/aim-train" resnet50 --device cuda --steps 30 --batch-size 64 --precision "$p" --eval-every 0 --eval-samples 256 --progress lines --results "$OUT/precision.jsonl"
  done
  for p in fp16 bf16 int8; do
    step "infer resnet50 $p" 90 "$bdir/aim-infer" resnet50 --device cuda --precision "$p" --iters 50 --batch-size 64 --compare-samples 256 --results "$OUT/precision.jsonl"
  done
  step "infer resnet50 cuda-graph" 60 "$bdir/aim-infer" resnet50 --device cuda --fp16 --cuda-graph --iters 50 --batch-size 16 --compare-samples 0 --results "$OUT/precision.jsonl"
  # Data parallel over NCCL with one GPU (issue 9): the communicator and reducer on a device.
  step "train din --gpus 1" 60 "$bdir/aim-train" din --device cuda --gpus 1 --config size=tiny --steps 20 --progress lines --results "$OUT/precision.jsonl"
  # ... and on every GPU of the machine when it has several, with the overlap figures in results.
  ngpu=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
  if [ "${ngpu:-0}" -gt 1 ]; then
    step "train din --gpus $ngpu" 90 "$bdir/aim-train" din --device cuda --gpus "$ngpu" --steps 100 --batch-size 256 --eval-every 0 --eval-samples 2000 --progress lines --results "$OUT/precision.jsonl"
    step "train resnet50 --gpus $ngpu --sync-bn" 120 "$bdir/aim-train" resnet50 --device cuda --gpus "$ngpu" --sync-bn --steps 20 --batch-size 32 --eval-every 0 --eval-samples 256 --progress lines --results "$OUT/precision.jsonl"
  fi
  step "infer din cuda-graph" 60 "$bdir/aim-infer" din --device cuda --cuda-graph --iters 50 --batch-size 256 --results "$OUT/precision.jsonl"
  if "$bdir/aim-infer" --list 2>/dev/null | grep -q '^crnn'; then
    step "infer crnn fp16" 60 "$bdir/aim-infer" crnn --device cuda --fp16 --iters 50 --batch-size 128 --results "$OUT/precision.jsonl"
  fi
fi
ceil_flag=()
[ -s "$OUT/ceilings-h200.json" ] && ceil_flag=(--ceilings "$OUT/ceilings-h200.json")
if [ -x "$bdir/aim-train" ]; then
  # Model names: the unindented lines of --list. Each model: the tiny configuration (correctness
  # of the CUDA path, results line), then the default size for the speed figures.
  for m in $("$bdir/aim-train" --list 2>/dev/null | awk '/^[a-z]/{print $1}'); do
    step "train $m tiny" 60 "$bdir/aim-train" "$m" --device cuda --steps 20 --config size=tiny --progress lines --results "$OUT/models.jsonl"
    step "train $m" 90 "$bdir/aim-train" "$m" --device cuda --steps 100 --batch-size 256 --eval-every 0 --eval-samples 2000 --progress lines --results "$OUT/models.jsonl"
    step "profile $m" 90 "$bdir/aim-train" "$m" --device cuda --steps 12 --batch-size 256 --eval-every 0 --eval-samples 2000 --progress lines --profile --trace "$OUT/trace-$m.json" --roofline "$OUT/roofline-$m.svg" --nvtx ${ceil_flag[@]+"${ceil_flag[@]}"}
    if [ -x "$bdir/aim-infer" ]; then
      step "infer $m" 60 "$bdir/aim-infer" "$m" --device cuda --iters 50 --batch-size 256,1024 --results "$OUT/models.jsonl"
    else
      results+=("| infer $m | SKIP | aim-infer not built |")
    fi
  done
else
  results+=("| models | SKIP | aim-train not built |")
fi

{
  echo
  echo "| step | result | note |"
  echo "|---|---|---|"
  printf '%s\n' "${results[@]}"
  echo
  echo "total $(($(date +%s) - t0)) s"
} >>"$summary"
cat "$summary"
fail=0
for r in "${results[@]}"; do [[ "$r" == *"| FAIL"* || "$r" == *"| TIMEOUT"* ]] && fail=1; done
exit $fail
