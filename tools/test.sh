#!/usr/bin/env bash
# The whole test suite: builds with CUDA compilation on (sm_90) and the SIMT emulator, runs every
# ctest label (unit, simt, parity; cuda tests skip with the reason when there is no GPU), then
# builds the CPU-only configuration (-DAIM_CUDA=OFF) and runs its tests too.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
start=$(date +%s)
"$root/tools/build.sh" "$root/build"
(cd "$root/build" && ctest --output-on-failure -j1)
if [ "${AIM_SKIP_CPU_ONLY:-0}" != "1" ]; then
  "$root/tools/build.sh" "$root/build-cpu" -DAIM_CUDA=OFF -DAIM_SIMT=OFF
  (cd "$root/build-cpu" && ctest --output-on-failure -j1 -L unit)
fi
if [ -x "$root/tools/gpu-check.sh" ]; then
  "$root/tools/gpu-check.sh" --dry-run
fi
echo "[test] total $(( $(date +%s) - start )) s"
