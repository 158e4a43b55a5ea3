#!/usr/bin/env bash
# Side-by-side CPU training speed of aim's BERT and its PyTorch peer (bench/peers/bert.py).
#
#   bench/peers/run_bert.sh [BUILD_DIR] [--size base|large|tiny] [--seq T] [--batch B]
#       [--threads N] [--rounds R] [--steps N] [--task squad|pretrain] [--mlm-rows all|predicted]
#       [--peer-env LIST] [--compile] [--max-load L] [--max-wait MIN] [--out FILE]
#
# Defaults: BERT-base, squad head, seq 128, batch 8, 2 threads, 3 rounds, 10 timed steps after 2
# warm-up steps, AdamW lr 3e-5 wd 0.01 with linear warm-up over 10% (aim-train bert's recipe),
# dropout 0.1 on both sides. aim: `aim-train bert` (step time p50 over steps + 2, as the other
# scripts; its synthetic text is made on the prefetch thread). Peer: bench/peers/bert.py
# (tests/peers/bert.py's BertForTask, random batches made before timing).
# --peer-env: comma-separated peers, each a column, run in this order after aim every round:
#   tuned  Debian's torch 1.13, the tuned environment of MACHINE.md lesson 4 (lib.sh; default)
#   stock  Debian's torch 1.13 as shipped (OMP_NUM_THREADS only)
#   pypi   PyPI's torch in $PYPI_TORCH_VENV (default /work/venv-torch; see docs/bert-bench.md),
#          tcmalloc preloaded and OMP_NUM_THREADS as tuned
#   pypi-compile  the same with torch.compile (the warm-up steps hold the compilation)
# --compile appends pypi-compile. --task pretrain: the peer projects every position onto the
# vocabulary (Hugging Face) unless --mlm-rows predicted (aim's formulation, same loss).
# Quiet machine: before every run the script waits until the 1-minute load average is below
# --max-load (default 0.8; 0: never wait), polling every 30 s for at most --max-wait minutes
# (default 25); once a wait runs out it stops waiting for the rest of the script. The load before
# and after each run is printed and appended to --out with the raw JSON lines (default
# bench-bert.jsonl). Peak RSS of each run from /usr/bin/time. Exit 1 when a run fails, 3 when aim's
# binary is missing (then only the peers run).
set -euo pipefail

build=build size=base seq=128 batch=8 threads=2 rounds=3 steps=10 task=squad mlm_rows=all
out=bench-bert.jsonl peers=tuned max_load=0.8 max_wait=25
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=$(basename "$0")
die() { echo "$script: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --size) size=${2:?--size needs a value}; shift 2 ;;
    --seq) seq=${2:?--seq needs a value}; shift 2 ;;
    --batch) batch=${2:?--batch needs a value}; shift 2 ;;
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --steps) steps=${2:?--steps needs a value}; shift 2 ;;
    --task) task=${2:?--task needs a value}; shift 2 ;;
    --mlm-rows) mlm_rows=${2:?--mlm-rows needs a value}; shift 2 ;;
    --peer-env) peers=${2:?--peer-env needs a value}; shift 2 ;;
    --compile) peers+=,pypi-compile; shift ;;
    --max-load) max_load=${2:?--max-load needs a value}; shift 2 ;;
    --max-wait) max_wait=${2:?--max-wait needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    -h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build=$1; shift ;;
  esac
done
for v in seq batch threads rounds steps max_wait; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v//_/-} must be a positive integer, got '${!v}'"
done
[[ $size =~ ^(base|large|tiny)$ ]] || die "--size must be base, large or tiny, got '$size'"
[[ $task =~ ^(squad|pretrain)$ ]] || die "--task must be squad or pretrain, got '$task'"
[[ $mlm_rows =~ ^(all|predicted)$ ]] || die "--mlm-rows must be all or predicted, got '$mlm_rows'"
[[ $max_load =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--max-load must be a number, got '$max_load'"
[[ -d $build ]] || die "build directory '$build' does not exist (build aim-train first)"
build=$(cd "$build" && pwd)
[[ -x /usr/bin/time ]] || die "/usr/bin/time missing (apt-get install -y time)"
# shellcheck disable=SC2034  # peer_env and python are read by lib.sh
python=/usr/bin/python3 peer_env=tuned
[[ -x $python ]] || die "$python not found (the peer needs Debian's python3-torch)"
# shellcheck source=lib.sh
source "$here/lib.sh"  # peer_cmd (the tuned environment), jget, median, run_one
tuned_cmd=("${peer_cmd[@]}")
pypi_python=${PYPI_TORCH_VENV:-/work/venv-torch}/bin/python

IFS=, read -r -a peer_list <<< "$peers"
declare -A seen=()
for p in "${peer_list[@]}"; do
  [[ $p =~ ^(tuned|stock|pypi|pypi-compile)$ ]] || die "--peer-env: '$p' is not tuned, stock, pypi or pypi-compile"
  [[ -z ${seen[$p]:-} ]] || die "--peer-env: '$p' given twice"
  seen[$p]=1
  if [[ $p == pypi* && ! -x $pypi_python ]]; then
    die "$pypi_python missing: python3 -m venv /work/venv-torch && /work/venv-torch/bin/pip install torch numpy (or set PYPI_TORCH_VENV)"
  fi
done

# peer_run NAME: the command line of that peer (environment, python, extra arguments).
peer_run() {
  case $1 in
    tuned) run_cmd=("${tuned_cmd[@]}" "$python") ;;
    stock) run_cmd=(env OMP_NUM_THREADS="$threads" "$python") ;;
    pypi) run_cmd=("${tuned_cmd[@]}" "$pypi_python") ;;
    pypi-compile) run_cmd=("${tuned_cmd[@]}" "$pypi_python") ;;
  esac
  run_cmd+=("$here/bert.py" --size "$size" --task "$task" --seq "$seq" --batch-size "$batch"
            --steps "$steps" --warmup 2 --lr 3e-5 --weight-decay 0.01 --dropout 0.1
            --threads "$threads" --mlm-rows "$mlm_rows")
  [[ $1 != pypi-compile ]] || run_cmd+=(--compile)
}

load1() { cut -d' ' -f1 /proc/loadavg; }
gave_up=0
wait_quiet() {
  local t0=$SECONDS
  ((gave_up)) && return 0
  awk -v m="$max_load" 'BEGIN {exit !(m > 0)}' || return 0
  while awk -v l="$(load1)" -v m="$max_load" 'BEGIN {exit !(l >= m)}'; do
    if ((SECONDS - t0 >= max_wait * 60)); then
      echo "$script: load average still $(load1) after $max_wait min; running anyway (and not waiting again)" >&2
      gave_up=1
      return 0
    fi
    sleep 30
  done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
aim_bin=$build/aim-train
aim_ok=1
if [[ ! -x $aim_bin ]]; then
  echo "$script: MISSING $aim_bin: aim's side is not built; running only the peers" >&2
  aim_ok=0 status=3
fi
aim_args=(bert --config size="$size" --config task="$task" --config seq_len="$seq"
          --batch-size "$batch" --steps $((steps + 2)) --device cpu --eval-every 0 --eval-samples 8
          --threads "$threads" --optimizer adamw --lr 3e-5 --weight-decay 0.01
          --schedule warmup_linear --warmup 10% --progress lines)
cols=()
((aim_ok)) && cols+=(aim)
cols+=("${peer_list[@]}")
declare -A p50s=() loads=() rss=()
echo "== bert $size $task seq $seq batch $batch, $threads threads, $rounds rounds; columns: ${cols[*]}" >&2
for ((r = 1; r <= rounds; ++r)); do
  for c in "${cols[@]}"; do
    wait_quiet
    l0=$(load1)
    res=$tmp/$c-$r.json
    if [[ $c == aim ]]; then
      run_one "aim round $r (load $l0)" "$tmp/$c-$r.log" -- /usr/bin/time -f %M -o "$tmp/$c-$r.rss" \
        "$aim_bin" "${aim_args[@]}" --results "$res"
      [[ -s $res ]] || die "aim round $r wrote no results to $res"
      tail -1 "$res" > "$res.last"
    else
      peer_run "$c"
      run_one "$c round $r (load $l0)" "$res" -- /usr/bin/time -f %M -o "$tmp/$c-$r.rss" "${run_cmd[@]}"
      grep '^{' "$res" | tail -1 > "$res.last"  # the peer's JSON is its last stdout line
      [[ -s $res.last ]] || die "$c round $r printed no JSON line"
    fi
    l1=$(load1)
    cat "$res.last" >> "$out"
    printf '{"bench":"run_bert","column":"%s","round":%d,"load1_before":%s,"load1_after":%s,"max_rss_kib":%s}\n' \
      "$c" "$r" "$l0" "$l1" "$(tail -1 "$tmp/$c-$r.rss")" >> "$out"
    p50s[$c]+="$(printf '%.1f' "$(jget "$res.last" step_time_ms.p50)") "
    loads[$c]+="$l0/$l1 "
    rss[$c]+="$(($(tail -1 "$tmp/$c-$r.rss") / 1024)) "
  done
done

echo
printf '%-13s %10s %9s   %-28s %-36s %s\n' column "p50 ms" "vs aim" "per-round p50 (ms)" "load before/after" "max RSS MiB"
a=''
# shellcheck disable=SC2086  # the per-round values are split on purpose
((aim_ok)) && a=$(median ${p50s[aim]})
# shellcheck disable=SC2086  # the per-round values are split on purpose
for c in "${cols[@]}"; do
  m=$(median ${p50s[$c]})
  ratio=-
  [[ -n $a ]] && ratio=$(awk -v a="$a" -v t="$m" 'BEGIN {printf "%.2fx", t / a}')
  printf '%-13s %10.1f %9s   %-28s %-36s %s\n' "$c" "$m" "$ratio" "${p50s[$c]}" "${loads[$c]}" "${rss[$c]}"
done
echo "(vs aim = column p50 / aim p50: > 1 means aim is faster; raw JSON lines appended to $out)"
exit $status
