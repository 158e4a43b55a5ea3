#!/usr/bin/env bash
# Where do the host synchronisations of a run on the emulated CUDA device come from?
#   tools/emu-sync-trace.sh build-emu/aim-train din --device cuda --config size=tiny --steps 5
# Runs the command with AIM_EMU_SYNC_TRACE=1 (kernels/simt/device/runtime.cpp prints each
# synchronisation with its call stack as binary+offset) and prints every distinct stack, most
# frequent first, with function names from addr2line (the binary's symbol table).
set -euo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
AIM_EMU_SYNC_TRACE=1 "$@" 2>"$log" >/dev/null || { echo "(the command failed: $(grep -v "^\[emulated cuda\] host sync" "$log" | tail -1))"; }
grep '^\[emulated cuda\] host sync' "$log" | sort | uniq -c | sort -rn | while read -r count rest; do
  what=${rest%%|*}
  echo "== $count x ${what#\[emulated cuda\] host sync on }"
  shown=0
  for frame in ${rest#*|}; do
    bin=${frame%+*}
    off=${frame##*+}
    fn=$(addr2line -f -C -e "$bin" "$off" 2>/dev/null | sed -n 1p)
    case "$fn" in ""|"??"|*simt::device*|cuda*|*host_sync*) continue ;; esac
    echo "     ${fn:0:150}"
    shown=$((shown + 1))
    ((shown < 8)) || break
  done
done
