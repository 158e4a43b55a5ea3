#!/usr/bin/env bash
# Side-by-side CPU speed of aim's NCF and its PyTorch peer (bench/peers/ncf.py).
#
#   bench/peers/run_ncf.sh [BUILD_DIR] [--threads T] [--rounds R] [--steps N] [--out FILE]
#                          [--batch B] [--optimizer OPT] [--lr LR] [--modes train,infer]
#                          [--peer-env tuned|stock] [--peer-args "..."]
#                          [--omp-wait default|passive|active]
#
# BUILD_DIR (default build/) holds aim-train and aim-infer. Defaults: the full-size NeuMF
# (6040 users, 3706 items), train batch 256 with Adam lr 0.001 (the reference's recipe), infer
# batch 100 (one user's candidates, the reference's evaluation batch), 2 threads, 3 rounds, 200
# timed steps after 20 warm-up steps. Per mode, aim and PyTorch alternate (aim, torch, aim,
# torch, ...), so drift on a shared machine hits both; both get the same thread count. aim runs
# in the standard environment; the peer in the tuned one of MACHINE.md lesson 4 (lib.sh).
# --peer-args passes extra flags to ncf.py (e.g. "--foreach"). --omp-wait sets OMP_WAIT_POLICY
# for both sides (default: left unset). On a loaded shared machine, OpenMP threads that spin
# after each parallel region (GNU OpenMP's default) make both sides' step times jump by a
# scheduler slice (~30 ms) whenever the other core is taken; "passive" avoids that
# (measurements: docs/ncf-data.md, "Speed beside PyTorch").
#
# Output: a table (mode, batch, p50 of each side = median over rounds of each run's p50, ratio
# torch/aim = speed-up of aim) and every run's raw JSON line appended to --out (default
# bench-ncf.jsonl). Exit status: 1 when a run fails (its log is shown), 3 when an aim binary is
# missing (the other runs still happen and the row says "missing"), else 0.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=build threads=2 rounds=3 steps=200 out=bench-ncf.jsonl optimizer=adam lr=0.001
batch_opt="" modes=train,infer peer_env=tuned peer_extra="" omp_wait=default
die() { echo "run_ncf.sh: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --steps) steps=${2:?--steps needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --batch) batch_opt=${2:?--batch needs a value}; shift 2 ;;
    --optimizer) optimizer=${2:?--optimizer needs a value}; shift 2 ;;
    --lr) lr=${2:?--lr needs a value}; shift 2 ;;
    --modes) modes=${2:?--modes needs a value}; shift 2 ;;
    --peer-env) peer_env=${2:?--peer-env needs a value}; shift 2 ;;
    --peer-args) peer_extra=${2?--peer-args needs a value}; shift 2 ;;
    --omp-wait) omp_wait=${2:?--omp-wait needs a value}; shift 2 ;;
    -h | --help) sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build=$1; shift ;;
  esac
done
for v in threads rounds steps; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--$v must be a positive integer, got '${!v}'"
done
[[ -z $batch_opt || $batch_opt =~ ^[1-9][0-9]*$ ]] || die "--batch must be a positive integer, got '$batch_opt'"
[[ $peer_env == tuned || $peer_env == stock ]] || die "--peer-env must be tuned or stock, got '$peer_env'"
case $omp_wait in
  default) ;;
  passive | active) export OMP_WAIT_POLICY=$omp_wait ;;
  *) die "--omp-wait must be default, passive or active, got '$omp_wait'" ;;
esac
[[ -d $build ]] || die "build directory '$build' does not exist (build aim-train/aim-infer first)"
build=$(cd "$build" && pwd)
python=/usr/bin/python3
[[ -x $python ]] || die "$python not found (the peer needs Debian's python3-torch)"
# shellcheck source=lib.sh
source "$here/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
rows=()
precise=()
read -r -a extra <<< "$peer_extra"
warmup=20
for mode in ${modes//,/ }; do
  case $mode in
    train)
      batch=${batch_opt:-256} key=step_time_ms aim_bin=$build/aim-train
      aim_args=(ncf --device cpu --batch-size "$batch" --steps $((steps + warmup)) --eval-every 0
                --eval-samples 1000 --optimizer "$optimizer" --lr "$lr" --threads "$threads")
      peer_args=(--mode train --batch-size "$batch" --steps "$steps" --warmup "$warmup"
                 --optimizer "$optimizer" --lr "$lr" --threads "$threads" "${extra[@]}") ;;
    infer)
      batch=${batch_opt:-100} key=latency_ms aim_bin=$build/aim-infer
      aim_args=(ncf --device cpu --batch-size "$batch" --iters "$steps" --warmup "$warmup"
                --threads "$threads")
      peer_args=(--mode infer --batch-size "$batch" --iters "$steps" --warmup "$warmup"
                 --threads "$threads" "${extra[@]}") ;;
    *) die "unknown mode '$mode' in --modes (allowed: train, infer)" ;;
  esac
  compare_mode "$here/ncf.py"
  # lib.sh's table rounds to 0.1 ms; inference batches take well under that, so the same medians
  # again from the runs' JSON lines with three decimals.
  a_p=() t_p=()
  for ((r = 1; r <= rounds; ++r)); do
    [[ -s $tmp/aim-$mode-$r.json.last ]] && a_p+=("$(jget "$tmp/aim-$mode-$r.json.last" "$key.p50")")
    t_p+=("$(jget "$tmp/torch-$mode-$r.json.last" "$key.p50")")
  done
  if ((${#a_p[@]})); then
    a=$(median "${a_p[@]}") t=$(median "${t_p[@]}")
    precise+=("$(printf '%-6s %6s %12.3f %12.3f %10.2fx' "$mode" "$batch" "$a" "$t" \
      "$(awk -v a="$a" -v t="$t" 'BEGIN {print t / a}')")")
  fi
done

echo
printf '%-6s %6s %12s %12s %11s   %s\n' mode batch "aim p50 ms" "torch p50 ms" "torch/aim" "per-round p50 (ms)"
printf '%s\n' "${rows[@]}"
if ((${#precise[@]})); then
  echo "the same medians with three decimals (OMP_WAIT_POLICY: ${OMP_WAIT_POLICY:-unset}):"
  printf '%s\n' "${precise[@]}"
fi
echo "raw JSON lines appended to $out"
exit $status
