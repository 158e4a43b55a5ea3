#!/usr/bin/env bash
# Side-by-side CPU training speed of aim's CRNN and its PyTorch peer (bench/peers/crnn.py).
#
#   bench/peers/run_crnn.sh [BUILD_DIR] [--batch B] [--threads T] [--rounds R] [--steps N]
#                           [--out FILE] [--peer-env tuned|stock]
#
# Defaults: batch 64 (the issue's), 2 threads, 3 rounds, 10 timed steps after 2 warm-up steps,
# momentum SGD 0.9, lr 0.01 (the recipe) on both sides, full size (MODELS.md §5.1). aim's step
# time includes its synthetic text rendering (prefetch thread); the peer's batches are made before
# timing.
# aim and PyTorch alternate per round; the peer runs in the tuned environment of MACHINE.md
# lesson 4 (bench/peers/lib.sh). Output: a table (median over rounds of each run's p50;
# torch/aim = speed-up of aim) and the raw JSON lines appended to --out (default bench-crnn.jsonl).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=build batch=64 threads=2 rounds=3 steps=10 out=bench-crnn.jsonl peer_env=tuned
die() { echo "run_crnn.sh: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --batch) batch=${2:?--batch needs a value}; shift 2 ;;
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --steps) steps=${2:?--steps needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --peer-env) peer_env=${2:?--peer-env needs a value}; shift 2 ;;
    -h | --help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build=$1; shift ;;
  esac
done
for v in batch threads rounds steps; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--$v must be a positive integer, got '${!v}'"
done
[[ $peer_env == tuned || $peer_env == stock ]] || die "--peer-env must be tuned or stock, got '$peer_env'"
[[ -d $build ]] || die "build directory '$build' does not exist (build aim-train first)"
build=$(cd "$build" && pwd)
python=/usr/bin/python3
[[ -x $python ]] || die "$python not found (the peer needs Debian's python3-torch)"
# shellcheck source=lib.sh
source "$here/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
rows=()
mode=train key=step_time_ms aim_bin=$build/aim-train
aim_args=(crnn --device cpu --batch-size "$batch" --steps $((steps + 2)) --eval-every 0
          --eval-samples 64 --threads "$threads")
peer_args=(--batch-size "$batch" --steps "$steps" --warmup 2 --lr 0.01 --threads "$threads")
compare_mode "$here/crnn.py"

echo
printf '%-6s %6s %12s %12s %11s   %s\n' mode batch "aim p50 ms" "torch p50 ms" "torch/aim" "per-round p50 (ms)"
printf '%s\n' "${rows[@]}"
echo "raw JSON lines appended to $out"
exit $status
