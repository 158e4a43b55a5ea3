#!/usr/bin/env bash
# Side-by-side CPU speed of aim's DIN and its PyTorch peer (bench/peers/din.py).
#
#   bench/peers/run_din.sh [BUILD_DIR] [--threads T] [--rounds R] [--out FILE]
#                          [--optimizer OPT] [--lr LR] [--modes train,infer] [--peer-env tuned|stock]
#                          [--att split|concat]
#
# BUILD_DIR (default build/) holds aim-train and aim-infer. Per mode, aim and PyTorch alternate
# (aim, torch, aim, torch, ...: R rounds each, default 2), so drift on a shared machine hits both.
# Both get the same thread count (default 2). aim runs in the standard environment (OPENBLAS_* as
# they are); the peer runs in the tuned environment of ../shared/MACHINE.md (lesson 4): OpenMP
# OpenBLAS with its AVX-512 kernels (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset), a caching
# malloc (tcmalloc via LD_PRELOAD) and ATen's AVX-512 kernels (ATEN_CPU_CAPABILITY=avx512).
# --att chooses DIN's attention FC1 formulation on both sides (split: the regrouped weight, aim's
# default; concat: the reference graph on the materialised [q, k, q-k, q*k]; models/din.h).
# --peer-env stock runs the peer as Debian ships it instead (for reference only). Why each knob:
# bench/peers/README.md.
#
# Output: a table (mode, batch, p50 of each side = median over rounds of each run's p50, ratio
# torch/aim = speed-up of aim) and every run's raw JSON line appended to --out (default
# bench-din.jsonl). Exit status: 1 when a run fails (its log is shown), 3 when an aim binary is
# missing (the other runs still happen and the row says "missing"), else 0.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=build threads=2 rounds=2 out=bench-din.jsonl optimizer=adam lr=0.01 modes=train,infer att=split
peer_env=tuned
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
python=/usr/bin/python3
[[ -x $python ]] || die "$python not found (the peer needs Debian's python3-torch)"

# The tuned peer environment (MACHINE.md lesson 4). A missing malloc is an error, not a fallback.
# tcmalloc rather than jemalloc: jemalloc's defaults purge allocations over 8 MiB at once (its
# oversize arena), so the 16 MB dense embedding gradient page-faults every step.
tcmalloc=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4
peer_cmd=(env OMP_NUM_THREADS="$threads")
if [[ $peer_env == tuned ]]; then
  [[ -f $tcmalloc ]] || die "$tcmalloc missing: apt-get install -y libgoogle-perftools4 (tools/deps.sh)"
  peer_cmd=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$threads"
            LD_PRELOAD="$tcmalloc" ATEN_CPU_CAPABILITY=avx512)
fi

# jget FILE PATH: one number from a one-line JSON file (PATH like step_time_ms.p50).
jget() {
  if command -v jq > /dev/null; then
    jq -er ".$2" "$1"
  else
    "$python" -c 'import json,sys
v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"
  fi
}
# median of the arguments (mean of the middle two for an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

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
                 --lr "$lr" --threads "$threads" --att "$att") ;;
    infer)
      batch=1024 key=latency_ms aim_bin=$build/aim-infer
      aim_args=(din --device cpu --batch-size 1024 --iters 30 --warmup 5 --threads "$threads"
                --config "att=$att")
      peer_args=(--mode infer --batch-size 1024 --iters 30 --warmup 5 --threads "$threads"
                 --att "$att") ;;
    *) die "unknown mode '$mode' in --modes (allowed: train, infer)" ;;
  esac
  aim_ok=1
  if [[ ! -x $aim_bin ]]; then
    echo "run_din.sh: MISSING $aim_bin: aim's $mode side is not built; running only the peer" >&2
    aim_ok=0 status=3
  fi
  aim_p50=() torch_p50=()
  echo "== $mode, batch $batch, $threads threads, $rounds rounds (peer env: $peer_env)" >&2
  for ((r = 1; r <= rounds; ++r)); do
    if ((aim_ok)); then
      res=$tmp/aim-$mode-$r.json
      run_one "aim $mode round $r" "$tmp/aim-$mode-$r.log" -- "$aim_bin" "${aim_args[@]}" --results "$res"
      [[ -s $res ]] || die "aim $mode round $r wrote no results to $res"
      tail -1 "$res" > "$res.last"
      tail -1 "$res" >> "$out"
      aim_p50+=("$(printf '%.1f' "$(jget "$res.last" "$key.p50")")")
    fi
    res=$tmp/torch-$mode-$r.json
    run_one "torch $mode round $r" "$res" -- "${peer_cmd[@]}" "$python" "$here/din.py" "${peer_args[@]}"
    # The peer prints its JSON as the last stdout line (warnings, if any, come before it).
    grep '^{' "$res" | tail -1 > "$res.last"
    [[ -s $res.last ]] || die "torch $mode round $r printed no JSON line"
    cat "$res.last" >> "$out"
    torch_p50+=("$(printf '%.1f' "$(jget "$res.last" "$key.p50")")")
  done
  t=$(median "${torch_p50[@]}")
  if ((aim_ok)); then
    a=$(median "${aim_p50[@]}")
    rows+=("$(printf '%-6s %6s %12.2f %12.2f %10.2fx   aim %s | torch %s' "$mode" "$batch" "$a" "$t" \
      "$(awk -v a="$a" -v t="$t" 'BEGIN {print t / a}')" "${aim_p50[*]}" "${torch_p50[*]}")")
  else
    rows+=("$(printf '%-6s %6s %12s %12.2f %11s   torch %s' "$mode" "$batch" missing "$t" - "${torch_p50[*]}")")
  fi
done

echo
printf '%-6s %6s %12s %12s %11s   %s\n' mode batch "aim p50 ms" "torch p50 ms" "torch/aim" "per-round p50 (ms)"
printf '%s\n' "${rows[@]}"
echo "raw JSON lines appended to $out"
exit $status
