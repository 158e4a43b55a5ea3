#!/usr/bin/env bash
# The whole test suite: builds with CUDA compilation on (sm_90) and the SIMT emulator, runs every
# ctest label (unit, simt, parity; cuda tests skip with the reason when there is no GPU), checks
# register spills, builds the emulated CUDA device (build-emu) and runs the CUDA path there (labels
# emu and cuda), then builds the CPU-only configuration (-DAIM_CUDA=OFF) under ASan+UBSan and runs
# its unit tests there (tools/sanitize.sh address cpu), then TSan on the threaded code and the
# emulated device under ASan+UBSan (tools/sanitize.sh thread cpu, address emu), then the fuzzers.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
start=$(date +%s)
# Each phase's wall time, for CI's budget (45 minutes cold; README).
last=$start
phase() {
  local now
  now=$(date +%s)
  echo "[test] $1: $((now - last)) s"
  last=$now
}
# pycocotools (and sacrebleu) for the COCO evaluation's and BLEU's comparison tests
# (tools/pydeps.sh; skipped when absent).
if [ -z "${AIM_PYCOCOTOOLS_PYTHON:-}" ]; then
  AIM_PYCOCOTOOLS_PYTHON="$("$root/tools/pydeps.sh" || true)"
  export AIM_PYCOCOTOOLS_PYTHON
fi
# sacreBLEU for the BLEU comparison test (the same venv; skipped when absent).
if [ -z "${AIM_SACREBLEU_PYTHON:-}" ] && [ -n "${AIM_PYCOCOTOOLS_PYTHON:-}" ]; then
  export AIM_SACREBLEU_PYTHON="$AIM_PYCOCOTOOLS_PYTHON"
fi
"$root/tools/build.sh" "$root/build"
phase "build (nvcc)"
(cd "$root/build" && ctest --output-on-failure -j1)
phase "ctest build"
# No own kernel spills registers on sm_90 (reads the objects the build made; tools/ptxas-allow.txt).
if ls "$root"/build/CMakeFiles/aim_kernels.dir/kernels/*/*.cu.o >/dev/null 2>&1; then "$root/tools/ptxas-check.sh" "$root/build"; fi
# The emulated CUDA device: --device cuda served on the CPU (kernels/simt/device/README.md); its
# runtime checks, every CUDA kernel variant against cpu.ref on emulated devices, and every model's
# tiny train and infer on cuda (tests/emu/emu_models.py).
if [ "${AIM_SKIP_EMU:-0}" != "1" ]; then
  # Only what its labels run (aim_unit_tests, the largest compile, runs in build and build-asan).
  AIM_BUILD_TARGETS="aim-train aim-infer aim_kernel_tests aim_emu_tests" \
    "$root/tools/build.sh" "$root/build-emu" -DAIM_CUDA=OFF -DAIM_CUDA_EMULATOR=ON
  phase "build-emu"
  (cd "$root/build-emu" && ctest --output-on-failure -j1 -L "emu|cuda")
  phase "ctest build-emu"
fi
# The CPU-only configuration (-DAIM_CUDA=OFF -DAIM_SIMT=OFF) built under ASan+UBSan: it proves the
# configuration builds and passes, and runs the unit tests (but the parity and minute-long learning
# cases), the tiny models' CLI train steps and tests/cli under the sanitizers (tools/sanitize.sh,
# docs/reliability.md "Sanitizer builds").
if [ "${AIM_SKIP_CPU_ONLY:-0}" != "1" ]; then
  "$root/tools/sanitize.sh" address cpu
  phase "build-asan and its tests"
fi
# The other two sanitizer configurations, each instrumenting a scope and compiling the rest as
# another build does (ccache): TSan on the code that owns threads (the local data-parallel ranks,
# the all-reduce, the prefetcher, the image loader) and the emulated CUDA device under ASan+UBSan
# (the emulator, the CUDA caching allocator, a subset of kernel families and models).
if [ "${AIM_SKIP_TSAN:-0}" != "1" ]; then
  "$root/tools/sanitize.sh" thread cpu
  phase "build-tsan and its tests"
fi
if [ "${AIM_SKIP_EMU:-0}" != "1" ] && [ "${AIM_SKIP_ASAN_EMU:-0}" != "1" ]; then
  "$root/tools/sanitize.sh" address emu
  phase "build-asan-emu and its tests"
fi
# Every reader and parser under libFuzzer with ASan/UBSan, a few seconds each on its seed corpus
# (fuzz/README.md; the long run: tools/fuzz.sh 3600).
if [ "${AIM_SKIP_FUZZ:-0}" != "1" ]; then
  "$root/tools/fuzz.sh" "${AIM_FUZZ_SECONDS:-5}"
  phase "fuzz"
fi
if [ -x "$root/tools/gpu-check.sh" ]; then
  "$root/tools/gpu-check.sh" --dry-run
fi
echo "[test] total $(( $(date +%s) - start )) s"
