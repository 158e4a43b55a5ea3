#!/usr/bin/env bash
# The unit tests under sanitizers (docs/reliability.md, "Sanitizer builds").
#   tools/sanitize.sh [address|thread] [cpu|emu]        (default: address cpu)
# address cpu  build-asan: the CPU-only configuration (-DAIM_CUDA=OFF -DAIM_SIMT=OFF) under
#              ASan+UBSan, all but the kernels' compute loops and the tests' own sources
#              (AIM_SANITIZE_ALL=1: those too); runs the unit label, the unit tests but the
#              plain builds' cases (tests/tiers/plain_only.txt: parity and learning runs),
#              the tiny models' CLI train steps and tests/cli (CI runs this in place of the plain
#              CPU-only build).
# thread cpu   build-tsan: the same configuration, TSan on the code that owns threads (tensor,
#              profiler, train with the local ranks and the all-reduce, the prefetcher and image
#              loader, the kernel registry) and their tests; the rest compiles as in build-cpu, so
#              ccache serves it. OMP_NUM_THREADS=1: GCC's libgomp is not instrumented.
# address emu  build-asan-emu: the emulated CUDA device (-DAIM_CUDA_EMULATOR=ON), ASan+UBSan on the
#              emulator runtime (kernels/simt), the CUDA host code (the caching allocator, its
#              blocks poisoned) and a few kernel families; runs the emulator's tests, those
#              families' variants on emulated GPUs and a few models' CUDA runs (EMU_ASAN_MODELS).
# AIM_SANITIZE_ALL=1 instruments every source in thread/emu mode too (a full cold build).
# AIM_JOBS sets the build's parallelism (default: the cores).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mode="${1:-address}"
where="${2:-cpu}"
jobs="${AIM_JOBS:-$(nproc)}"
start=$(date +%s)

# Reports fail the test that makes them: UBSan stops at the first finding (also
# -fno-sanitize-recover), ASan always does, TSan exits 66 at the end of a racy process.
# ASan's leak check stays on (off only for tests/cli's mpirun runs: OpenMPI's own allocations).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/tools/sanitize/lsan.supp:print_suppressions=0}"

configure() {  # dir, cmake args...
  local dir="$1"
  shift
  "$root/tools/deps.sh"
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
}

export AIM_SOURCE_DIR="$root"  # the tests' data (tests/support/common.h), as under ctest
# The plain builds' cases (tests/tiers/plain_only.txt: PyTorch parity, learning runs, -O2
# tolerances) and the long tests are not run here.
plain_only="$("$root/tools/gtest-filter.sh" "$root/tests/tiers/plain_only.txt"):*.Long*"

case "$mode/$where" in
  address/cpu)
    dir="$root/build-asan"
    # CI's budget: the kernels' compute loops (kernels/<family>/, each variant checked against
    # cpu.ref in the plain builds) and the tests' own sources compile as in build-cpu, the library
    # and the CLIs are instrumented (under full instrumentation aim_kernel_tests alone took 461 s
    # against 12 s; instrumented, the test sources took twice their plain compile, 1085 of the
    # build's 2143 CPU seconds); AIM_SANITIZE_ALL=1 instruments everything.
    only='^((tensor|data|autograd|layers|models|train|infer|cli|profiler)/|kernels/[a-z_]+[.]cpp$)'
    [ "${AIM_SANITIZE_ALL:-0}" = "1" ] && only=""
    configure "$dir" -DAIM_CUDA=OFF -DAIM_SIMT=OFF -DAIM_SANITIZE=address,undefined \
      "-DAIM_SANITIZE_ONLY=$only"
    # What the steps below run (not aim-bench, the MPI tests or the parity dumper).
    cmake --build "$dir" -j"$jobs" --target aim_unit_tests aim_kernel_tests aim-train aim-infer
    built=$(date +%s)
    cd "$dir"
    # The unit label (the kernel variants against cpu.ref, the layer and reference checks).
    ctest --output-on-failure -j1 -L unit -E '^aim_unit_tests$'
    # The unit tests: every case but the plain builds' (the PyTorch parity ones, numerics checked
    # in the plain build, and the learning runs, hundreds of steps each); the models'
    # forward/backward and train steps, the local data-parallel ranks, the all-reduce and the
    # prefetching loader are in it. tools/test.sh runs these cases here only, not in build.
    tests/aim_unit_tests --gtest_brief=1 --gtest_filter="-$plain_only"
    # The model CLIs: the tiny models' train steps and tests/cli (flags, errors, checkpoints,
    # resume, inference round trip, local ranks).
    ctest --output-on-failure -j1 -R '^(aim_train_.*_tiny|cli_tests)$'
    ;;
  thread/cpu)
    dir="$root/build-tsan"
    only='^(tensor/|profiler/|train/|kernels/(registry|math_mode|error_flag)\.cpp|autograd/(amp|variable|int8)\.cpp|layers/batchnorm\.cpp|data/image_folder\.cpp|tests/(data/test_prefetch|data/test_image_data|train/test_dist_comm|train/test_dist_reducer|train/test_data_parallel|train/test_sync_batchnorm)\.cpp)'
    supp="$root/tools/sanitize/tsan-scoped.supp"  # libstdc++'s shared_ptr in mixed objects
    if [ "${AIM_SANITIZE_ALL:-0}" = "1" ]; then
      only=""
      supp="$root/tools/sanitize/tsan.supp"
    fi
    export TSAN_OPTIONS="${TSAN_OPTIONS:-second_deadlock_stack=1:suppressions=$supp}"
    configure "$dir" -DAIM_CUDA=OFF -DAIM_SIMT=OFF -DAIM_SANITIZE=thread "-DAIM_SANITIZE_ONLY=$only"
    cmake --build "$dir" -j"$jobs" --target aim_unit_tests
    built=$(date +%s)
    cd "$dir"
    # StuckRankTimesOutAndIsAbandoned leaves a rank thread behind on purpose, holding references
    # into the finished call's frame: TSan rightly reports the stack's reuse (docs/reliability.md).
    OMP_NUM_THREADS=1 tests/aim_unit_tests --gtest_brief=1 \
      --gtest_filter='Prefetch.*:ImageFolder*:DistLocal.*:DistReducer.*:DistRendezvous.*:DataParallel.*:SyncBatchNorm.*:-DataParallel.StuckRankTimesOutAndIsAbandoned'
    ;;
  address/emu)
    dir="$root/build-asan-emu"
    only='^(kernels/simt/|tensor/|train/dist/communicator_nccl\.cpp|kernels/(elementwise|reduce|softmax|norm|optim|embedding|copy)/.*\.cu$|tests/emu/|tests/kernels/test_variants\.cpp)'
    [ "${AIM_SANITIZE_ALL:-0}" = "1" ] && only=""
    configure "$dir" -DAIM_CUDA=OFF -DAIM_CUDA_EMULATOR=ON -DAIM_SANITIZE=address,undefined \
      "-DAIM_SANITIZE_ONLY=$only"
    cmake --build "$dir" -j"$jobs" --target aim_emu_tests aim_kernel_tests aim-train aim-infer
    built=$(date +%s)
    cd "$dir"
    AIM_SIM_GPUS=8 tests/aim_emu_tests --gtest_brief=1
    AIM_SIM_GPUS=2 tests/aim_kernel_tests --gtest_brief=1 \
      --gtest_filter='Variant_binary.cuda*:Variant_unary*.cuda*:Variant_bias_gelu*.cuda*:Variant_reduce.cuda*:Variant_softmax*.cuda*:Variant_*layernorm*.cuda*:Variant_adam_update.cuda*:Variant_embedding*.cuda*:Variant_copy.cuda*'
    # Models on --device cuda (tests/emu/emu_models.py: training in fp32/fp16/bf16, inference in
    # every precision and captured, din's captured training steps, --gpus 8 ranks over NCCL): the
    # allocator's poisoned blocks catch a kernel or copy on a freed tensor on the whole CUDA path.
    # CI's subset (EMU_ASAN_MODELS, space-separated; "all" for every model: about 25 minutes here).
    models="${EMU_ASAN_MODELS:-din dien ncf wide_deep bert crnn nmt gcn faster_rcnn}"
    [ "$models" = "all" ] && models=""
    # shellcheck disable=SC2086
    AIM_SIM_GPUS=8 /usr/bin/python3 "$root/tests/emu/emu_models.py" "$dir" "$root" $models
    ;;
  *)
    echo "usage: tools/sanitize.sh [address|thread] [cpu|emu] (thread emu is not a configuration)" >&2
    exit 2
    ;;
esac
end=$(date +%s)
echo "[sanitize] $mode $where: build $((built - start)) s, tests $((end - built)) s"
