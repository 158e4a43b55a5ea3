#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/: clang, -fsanitize=fuzzer,address,undefined over the readers)
# and runs each on a copy of its seed corpus (fuzz/corpus/<target>) for a bounded time.
#   tools/fuzz.sh [SECONDS_PER_TARGET (default 10)] [TARGET ...]
# CI runs it at 3 s per target (tools/test.sh); the long run is e.g. `tools/fuzz.sh 3600 safetensors`.
# A crash, a sanitizer report or an allocation over 1 GiB (-malloc_limit_mb: a reader must
# refuse a huge size before allocating) fails the run; the input is kept in build-fuzz/findings/
# (make it a regression test: its bytes into fuzz/corpus/<target>/ and a unit test of the fix).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-10}"
shift || true
command -v clang++ >/dev/null || { echo "[fuzz] clang++ is missing (apt-get install clang)"; exit 1; }
build="$root/build-fuzz"
CXX=clang++ cmake -S "$root/fuzz" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"
targets=("$@")
if ((${#targets[@]} == 0)); then
  for f in "$root"/fuzz/targets/*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
mkdir -p "$build/findings"
fail=()
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  rm -rf "$work" && mkdir -p "$work"
  [ -d "$root/fuzz/corpus/$t" ] && cp "$root/fuzz/corpus/$t"/* "$work"/ 2>/dev/null || true
  log="$build/$t.log"
  rc=0
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/fuzz_$t" "$work" -max_total_time="$secs" -malloc_limit_mb=1024 -rss_limit_mb=3072 \
    -timeout=20 -artifact_prefix="$build/findings/$t-" -print_final_stats=1 >"$log" 2>&1 || rc=$?
  if ((rc == 0)); then
    echo "[fuzz] $t: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs, $(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*') edges covered, corpus $(find "$work" -type f | wc -l) inputs, no finding"
  else
    # (|| true: a process killed without a report must not end the loop under set -e)
    echo "[fuzz] $t: FINDING, exit status $rc (log $log):"
    grep -E "ERROR|SUMMARY|==[0-9]+==|Test unit written" "$log" | head -8 || true
    fail+=("$t")
  fi
done
if ((${#fail[@]})); then
  echo "[fuzz] findings in: ${fail[*]}"
  exit 1
fi
