#!/usr/bin/env bash
# The whole test suite, as CI runs it on a clean clone (budget: 45 minutes cold; each phase's wall
# time is printed): builds the CUDA configuration (sm_90; every program but aim_unit_tests) and
# runs its ctest labels (unit, simt, cli, ...; cuda tests skip with the reason when there is no
# GPU) and the register-spill check; builds the emulated CUDA device (build-emu) and runs the CUDA
# path there (labels emu and cuda); the CPU-only configuration (-DAIM_CUDA=OFF -DAIM_SIMT=OFF)
# under ASan+UBSan with the unit tests and tests/cli (tools/sanitize.sh address cpu), TSan on the
# threaded code (thread cpu), the same configuration plain (build-plain: PyTorch parity and the
# learning runs), the emulated device under ASan+UBSan (address emu), then the fuzzers.
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
# The CUDA configuration: every program but aim_unit_tests (without a GPU its cases are CPU cases:
# they run in build-asan and build-plain below, the CPU-only configuration whose objects ccache
# shares between the sanitizer builds).
AIM_BUILD_TARGETS="aim_programs_but_unit_tests" "$root/tools/build.sh" "$root/build"
phase "build (nvcc)"
# Not the long tests (label long: minutes each; `ctest -L long`), and tests/cli when the ASan+UBSan
# phase runs it below.
skip_here='aim_unit_tests|aim_training_tests|aim_long_tests'
[ "${AIM_SKIP_CPU_ONLY:-0}" != "1" ] && skip_here+='|cli_tests'
(cd "$root/build" && ctest --output-on-failure -j1 -LE long -E "^($skip_here)\$")
phase "ctest build"
# No own kernel spills registers on sm_90 (reads the objects the build made; tools/ptxas-allow.txt).
if ls "$root"/build/CMakeFiles/aim_kernels.dir/kernels/*/*.cu.o >/dev/null 2>&1; then "$root/tools/ptxas-check.sh" "$root/build"; fi
# The emulated CUDA device: --device cuda served on the CPU (kernels/simt/device/README.md); its
# runtime checks, every CUDA kernel variant against cpu.ref on emulated devices, and every model's
# tiny train and infer on cuda (tests/emu/emu_models.py).
if [ "${AIM_SKIP_EMU:-0}" != "1" ]; then
  # Only what its labels run (aim_unit_tests, the largest compile, runs in build-asan and
  # build-plain).
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
# The plain CPU-only configuration (build-plain: -DAIM_CUDA=OFF -DAIM_SIMT=OFF, nothing
# instrumented). Its objects are those the two sanitizer builds above compile uninstrumented (the
# tests and kernels in build-asan, the library outside TSan's scope in build-tsan), so ccache serves
# all but TSan's scope. It runs the training tier (aim_training_tests) and the cases of
# aim_unit_tests that run in plain builds only (tests/tiers/plain_only.txt: PyTorch parity, the
# learning runs, -O2 tolerances); all of aim_unit_tests when the ASan phase is skipped.
AIM_BUILD_TARGETS="aim_unit_tests" "$root/tools/build.sh" "$root/build-plain" -DAIM_CUDA=OFF \
  -DAIM_SIMT=OFF
phase "build-plain"
if [ "${AIM_SKIP_CPU_ONLY:-0}" != "1" ]; then
  (cd "$root/build-plain" && ctest --output-on-failure -j1 -R '^aim_training_tests$')
  plain_only="$("$root/tools/gtest-filter.sh" "$root/tests/tiers/plain_only.txt")"
  training="$("$root/tools/gtest-filter.sh" "$root/tests/tiers/training.txt")"
  (cd "$root/build-plain/tests" && AIM_SOURCE_DIR="$root" ./aim_unit_tests --gtest_brief=1 \
    --gtest_filter="$plain_only-$training:*.Long*")
else
  (cd "$root/build-plain" && ctest --output-on-failure -j1 -R '^aim_(unit|training)_tests$')
fi
phase "build-plain's tests"
if [ "${AIM_SKIP_EMU:-0}" != "1" ] && [ "${AIM_SKIP_ASAN_EMU:-0}" != "1" ]; then
  "$root/tools/sanitize.sh" address emu
  phase "build-asan-emu and its tests"
fi
# Every reader and parser under libFuzzer with ASan/UBSan, a few seconds each on its seed corpus
# (fuzz/README.md; the long run: tools/fuzz.sh 3600).
if [ "${AIM_SKIP_FUZZ:-0}" != "1" ]; then
  "$root/tools/fuzz.sh" "${AIM_FUZZ_SECONDS:-3}"
  phase "fuzz"
fi
if [ -x "$root/tools/gpu-check.sh" ]; then
  "$root/tools/gpu-check.sh" --dry-run
fi
echo "[test] total $(( $(date +%s) - start )) s"
