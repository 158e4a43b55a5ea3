#!/usr/bin/env bash
# Side-by-side CPU speed of aim's DIN and its PyTorch peer (bench/peers/din.py).
#
#   bench/peers/run_din.sh [BUILD_DIR] [--threads T] [--rounds R] [--out FILE]
#                          [--optimizer OPT] [--lr LR] [--modes train,infer] [--peer-env tuned|stock]
#                          [--att fold|split|concat] [--peer-python PY] [--peer-args "..."]
#
# BUILD_DIR (default build/) holds aim-train and aim-infer. Per mode, aim and PyTorch alternate
# (aim, torch, aim, torch, ...: R rounds each, default 2), so drift on a shared machine hits both.
# Both get the same thread count (default 2). aim runs in the standard environment (OPENBLAS_* as
# they are); the peer runs in the tuned environment of ../shared/MACHINE.md (lesson 4): OpenMP
# OpenBLAS with its AVX-512 kernels (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset), a caching
# malloc (tcmalloc via LD_PRELOAD) and ATen's AVX-512 kernels (ATEN_CPU_CAPABILITY=avx512).
# --att chooses DIN's attention FC1 formulation on both sides (fold: q folded into per-row weights,
# one batched GEMM, aim's default; split: the regrouped weight; concat: the reference graph on the
# materialised [q, k, q-k, q*k]; models/din.h).
# --peer-env stock runs the peer as Debian ships it instead (for reference only). Why each knob:
# bench/peers/README.md. --peer-python runs the peer with another Python (e.g.
# /work/venv-torch/bin/python: PyPI's current torch, docs/bert-bench.md); --peer-args passes extra
# flags to din.py (e.g. "--compile": torch.compile, compiled in the untimed warm-up).
#
# Output: a table (mode, batch, p50 of each side = median over rounds of each run's p50, ratio
# torch/aim = speed-up of aim) and every run's raw JSON line appended to --out (default
# bench-din.jsonl). Exit status: 1 when a run fails (its log is shown), 3 when an aim binary is
# missing (the other runs still happen and the row says "missing"), else 0.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=build threads=2 rounds=2 out=bench-din.jsonl optimizer=adam lr=0.01 modes=train,infer att=fold
peer_env=tuned peer_python=/usr/bin/python3 peer_extra=""
die() { echo "run_din.sh: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --optimizer) optimizer=${2:?--optimizer needs a value}; shift 2 ;;
    --lr) lr=${2:?--lr needs a value}; shift 2 ;;
    --att) att=${2:?--att needs a value}; shift 2 ;;
    --modes) modes=${2:?--modes needs a value}; shift 2 ;;
    --peer-env) peer_env=${2:?--peer-env needs a value}; shift 2 ;;
    --peer-python) peer_python=${2:?--peer-python needs a value}; shift 2 ;;
    --peer-args) peer_extra=${2?--peer-args needs a value}; shift 2 ;;
    -h | --help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build=$1; shift ;;
  esac
done
[[ $threads =~ ^[1-9][0-9]*$ ]] || die "--threads must be a positive integer, got '$threads'"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer, got '$rounds'"
[[ $peer_env == tuned || $peer_env == stock ]] || die "--peer-env must be tuned or stock, got '$peer_env'"
[[ -d $build ]] || die "build directory '$build' does not exist (build aim-train/aim-infer first)"
build=$(cd "$build" && pwd)
python=$peer_python
[[ -x $python ]] || die "$python not found (the peer needs a Python with torch: Debian's python3-torch)"
read -r -a extra <<< "$peer_extra"

# shellcheck source=lib.sh
source "$here/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
rows=()

# run_one NAME LOG -- CMD...: runs CMD (stdout and stderr to LOG), fails loudly with the log tail if it fails.
run_one() {
  local name=$1 log=$2; shift 3
  echo "  $name: $*" | cut -c1-220 >&2
  if ! "$@" > "$log" 2>&1; then
    echo "run_din.sh: $name failed; last lines of its log:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
}

for mode in ${modes//,/ }; do
  case $mode in
    train)
      batch=256 key=step_time_ms aim_bin=$build/aim-train
      aim_args=(din --device cpu --batch-size 256 --steps 60 --eval-every 0 --eval-samples 1000
                --optimizer "$optimizer" --lr "$lr" --threads "$threads" --config "att=$att")
      peer_args=(--mode train --batch-size 256 --steps 60 --warmup 10 --optimizer "$optimizer"
                 --lr "$lr" --threads "$threads" --att "$att" "${extra[@]}") ;;
    infer)
      batch=1024 key=latency_ms aim_bin=$build/aim-infer
      aim_args=(din --device cpu --batch-size 1024 --iters 30 --warmup 5 --threads "$threads"
                --config "att=$att")
      peer_args=(--mode infer --batch-size 1024 --iters 30 --warmup 5 --threads "$threads"
                 --att "$att" "${extra[@]}") ;;
    *) die "unknown mode '$mode' in --modes (allowed: train, infer)" ;;
  esac
  compare_mode "$here/din.py"
done

echo
printf '%-6s %6s %12s %12s %11s   %s\n' mode batch "aim p50 ms" "torch p50 ms" "torch/aim" "per-round p50 (ms)"
printf '%s\n' "${rows[@]}"
echo "raw JSON lines appended to $out"
exit $status
