#!/usr/bin/env bash
# Configure and build aim. Usage: tools/build.sh [build-dir] [extra cmake args...]
# Default: ./build, CUDA on when nvcc is found (sm_90), SIMT emulator build on.
# AIM_BUILD_TARGETS="t1 t2 ..." builds only those targets (tools/test.sh: what a step runs).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/build}"
shift || true
"$root/tools/deps.sh"
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
targets=()
[ -n "${AIM_BUILD_TARGETS:-}" ] && read -r -a targets <<< "--target $AIM_BUILD_TARGETS"
cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
