#!/usr/bin/env bash
# aim's fused attention op beside PyTorch's attention on this CPU: time and memory.
#
#   bench/peers/run_attention.sh [BUILD_DIR] [--T 128,512,2048] [--B 1] [--heads 12] [--hs 64]
#       [--threads 2] [--rounds 3] [--reps 10] [--peer-env LIST] [--compile] [--no-ref]
#       [--max-load L] [--max-wait MIN] [--out FILE]
#
# Problem: aim-bench's attention case B, NH, Tq = Tk = T, HS, mask=1 (BERT's additive key-padding
# mask [B, 1, 1, T], the last key -10000), causal=0, dropout=0, f32; defaults B 1, NH 12, HS 64.
# aim: `aim-bench op attention_fwd|attention_bwd --shape B=..,NH=..,Tq=T,Tk=T,HS=..,mask=1,causal=0,
# dropout=0 --variants V` for V = cpu.flash (the CPU default: blocked online softmax) and, in the
# first round only unless --no-ref, cpu.ref (the oracle: a row at a time in f64, but its mask is
# expanded to [B, NH, T, T] doubles); aim's fwd+bwd = attention_fwd + attention_bwd medians.
# Peers (bench/peers/attention.py), columns per --peer-env entry (comma-separated):
#   tuned  Debian torch 1.13, tuned env (lib.sh): the unfused softmax(q k^T / sqrt(d) + mask) v
#   stock  Debian torch 1.13 as shipped: the same
#   pypi   PyPI torch in $PYPI_TORCH_VENV (default /work/venv-torch), tcmalloc + OMP_NUM_THREADS:
#          the unfused formula and F.scaled_dot_product_attention
# --compile adds torch.compile'd versions of both for pypi. Each peer: fwd (no_grad) and fwd+bwd.
# Timing as aim-bench: warm-up, then reps calls each after a 64 MiB cache flush; median ms per
# run, the table shows the median over rounds. Memory: peak RSS (ru_maxrss / /usr/bin/time) of
# each process minus that of a baseline process holding the same inputs and running nothing
# (aim-bench --variants none; attention.py --mode none), once per T and framework; both sides'
# growth includes the 64 MiB flush buffer. Before every (T, round) group the script waits until
# the 1-minute load average is below --max-load (default 0.8; 0: never), polling every 30 s for
# at most --max-wait minutes (default 25; after one timeout it stops waiting). Raw JSON lines are
# appended to --out (default bench-attention.jsonl). Exit 1 when a run fails, 3 without aim-bench.
set -euo pipefail

build=build Ts=128,512,2048 B=1 heads=12 hs=64 threads=2 rounds=3 reps=10 peers=tuned compile=0
ref=1 out=bench-attention.jsonl max_load=0.8 max_wait=25
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=$(basename "$0")
die() { echo "$script: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --T) Ts=${2:?--T needs a value}; shift 2 ;;
    --B) B=${2:?--B needs a value}; shift 2 ;;
    --heads) heads=${2:?--heads needs a value}; shift 2 ;;
    --hs) hs=${2:?--hs needs a value}; shift 2 ;;
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --reps) reps=${2:?--reps needs a value}; shift 2 ;;
    --peer-env) peers=${2:?--peer-env needs a value}; shift 2 ;;
    --compile) compile=1; shift ;;
    --no-ref) ref=0; shift ;;
    --max-load) max_load=${2:?--max-load needs a value}; shift 2 ;;
    --max-wait) max_wait=${2:?--max-wait needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build=$1; shift ;;
  esac
done
for v in B heads hs threads rounds reps max_wait; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v//_/-} must be a positive integer, got '${!v}'"
done
[[ $Ts =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--T: comma-separated positive integers, got '$Ts'"
[[ $max_load =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--max-load must be a number, got '$max_load'"
[[ -d $build ]] || die "build directory '$build' does not exist (build aim-bench first)"
build=$(cd "$build" && pwd)
[[ -x /usr/bin/time ]] || die "/usr/bin/time missing (apt-get install -y time)"
# shellcheck disable=SC2034  # peer_env and python are read by lib.sh
python=/usr/bin/python3 peer_env=tuned
[[ -x $python ]] || die "$python not found (the peer needs Debian's python3-torch)"
# shellcheck source=lib.sh
source "$here/lib.sh"  # peer_cmd (the tuned environment), jget, median, run_one
tuned_cmd=("${peer_cmd[@]}")
pypi_python=${PYPI_TORCH_VENV:-/work/venv-torch}/bin/python

# Columns: name, then how to run it.
cols=()
IFS=, read -r -a peer_list <<< "$peers"
for p in "${peer_list[@]}"; do
  case $p in
    tuned | stock) cols+=("$p-unfused") ;;
    pypi)
      [[ -x $pypi_python ]] || die "$pypi_python missing: python3 -m venv /work/venv-torch && /work/venv-torch/bin/pip install torch numpy (or set PYPI_TORCH_VENV)"
      cols+=(pypi-unfused pypi-sdpa)
      ((compile)) && cols+=(pypi-compile-unfused pypi-compile-sdpa) ;;
    *) die "--peer-env: '$p' is not tuned, stock or pypi" ;;
  esac
done
((compile)) && [[ ,$peers, != *,pypi,* ]] && die "--compile needs pypi in --peer-env (torch 1.13 has no torch.compile)"

# peer_run COLUMN MODE: the peer's command line.
peer_run() {
  local c=$1 mode=$2
  case $c in
    tuned-*) run_cmd=("${tuned_cmd[@]}" "$python") ;;
    stock-*) run_cmd=(env OMP_NUM_THREADS="$threads" "$python") ;;
    pypi-*) run_cmd=("${tuned_cmd[@]}" "$pypi_python") ;;
  esac
  run_cmd+=("$here/attention.py" --B "$B" --heads "$heads" --T "$T" --hs "$hs" --mode "$mode"
            --impl "${c##*-}" --reps "$reps" --threads "$threads")
  [[ $c != *-compile-* ]] || run_cmd+=(--compile)
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
aim_bin=$build/aim-bench
aim_ok=1
if [[ ! -x $aim_bin ]]; then
  echo "$script: MISSING $aim_bin: aim's side is not built; running only the peers" >&2
  aim_ok=0 status=3
fi

# annotate FILE KIB: FILE's JSON line with the load average now and the run's peak RSS added.
annotate() {
  "$python" -c 'import json, sys
r = json.load(open(sys.argv[1]))
r.update(load1_after=float(sys.argv[2]), max_rss_kib=int(sys.argv[3]))
print(json.dumps(r))' "$1" "$(load1)" "$2"
}
# aim_run OP VARIANT NAME: one aim-bench run; its median ms in $ms and peak RSS (KiB) in $kib.
aim_run() {
  local op=$1 var=$2 name=$3 res=$tmp/$3.json
  run_one "$name (load $(load1))" "$tmp/$name.log" -- /usr/bin/time -f %M -o "$tmp/$name.rss" \
    "$aim_bin" op "$op" --shape "B=$B,NH=$heads,Tq=$T,Tk=$T,HS=$hs,mask=1,causal=0,dropout=0" \
    --variants "$var" --reps "$reps" --results "$res"
  kib=$(tail -1 "$tmp/$name.rss")
  ms=-
  if [[ $var == none ]]; then
    printf '{"bench":"op-baseline","op":"%s","T":%d,"load1_after":%s,"max_rss_kib":%d}\n' \
      "$op" "$T" "$(load1)" "$kib" >> "$out"
  else
    [[ -s $res ]] || die "$name wrote no results"
    tail -1 "$res" > "$res.last"
    [[ $(jget "$res.last" status) == ok ]] || die "$name: status $(jget "$res.last" status) ($(jget "$res.last" note))"
    ms=$(jget "$res.last" median_ms)
    annotate "$res.last" "$kib" >> "$out"
  fi
}
# peer_one COLUMN MODE NAME: one peer run; median ms in $ms, peak RSS in $kib, op growth in $grow.
peer_one() {
  local res=$tmp/$3.json
  peer_run "$1" "$2"
  run_one "$3 (load $(load1))" "$res" -- /usr/bin/time -f %M -o "$tmp/$3.rss" "${run_cmd[@]}"
  grep '^{' "$res" | tail -1 > "$res.last"
  [[ -s $res.last ]] || die "$3 printed no JSON line"
  kib=$(tail -1 "$tmp/$3.rss")
  annotate "$res.last" "$kib" >> "$out"
  ms=- grow=-
  if [[ $2 != none ]]; then
    ms=$(jget "$res.last" median_ms)
    grow=$(jget "$res.last" op_growth_kib)
  fi
}
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

declare -A fwd=() fb=() memf=() memfb=() grow_f=() grow_fb=() loads=()
IFS=, read -r -a T_list <<< "$Ts"
for T in "${T_list[@]}"; do
  echo "== T=$T: B=$B NH=$heads HS=$hs f32 mask [B,1,1,T], $threads threads, $rounds rounds" >&2
  # Memory baselines: the same inputs, nothing run.
  declare -A base=()
  if ((aim_ok)); then
    aim_run attention_fwd none "aim-base-fwd-T$T"; base[aim_fwd]=$kib
    aim_run attention_bwd none "aim-base-bwd-T$T"; base[aim_bwd]=$kib
  fi
  for c in "${cols[@]}"; do
    k=${c%%-*}
    [[ -n ${base[$k]:-} ]] && continue
    peer_one "$c" none "$k-base-T$T"; base[$k]=$kib
  done
  for ((r = 1; r <= rounds; ++r)); do
    wait_quiet
    loads[$T]+="$(load1)"
    runs=(cpu.flash)
    ((ref && r == 1)) && runs+=(cpu.ref)
    if ((aim_ok)); then
      for v in "${runs[@]}"; do
        aim_run attention_fwd "$v" "aim-$v-fwd-T$T-r$r"; f=$ms; mf=$((kib - base[aim_fwd]))
        aim_run attention_bwd "$v" "aim-$v-bwd-T$T-r$r"; b=$ms; mb=$((kib - base[aim_bwd]))
        fwd[aim-$v,$T]+="$f " fb[aim-$v,$T]+="$(awk -v f="$f" -v b="$b" 'BEGIN {print f + b}') "
        memf[aim-$v,$T]+="$(mib "$mf") " memfb[aim-$v,$T]+="$(mib "$mb") "
      done
    fi
    for c in "${cols[@]}"; do
      k=${c%%-*}
      peer_one "$c" fwd "$c-fwd-T$T-r$r"; fwd[$c,$T]+="$ms " memf[$c,$T]+="$(mib $((kib - base[$k]))) " grow_f[$c,$T]+="$(mib "$grow") "
      peer_one "$c" fwdbwd "$c-fb-T$T-r$r"; fb[$c,$T]+="$ms " memfb[$c,$T]+="$(mib $((kib - base[$k]))) " grow_fb[$c,$T]+="$(mib "$grow") "
    done
    loads[$T]+="/$(load1) "
  done
  unset base
done

all=()
((aim_ok)) && { all+=(aim-cpu.flash); ((ref)) && all+=(aim-cpu.ref); }
all+=("${cols[@]}")
echo
echo "time: median over rounds of each run's median ms; x = column / aim cpu.flash (> 1: aim faster)"
printf '%-6s %-21s %10s %8s %11s %8s   %s\n' T column "fwd ms" "x" "fwd+bwd ms" "x" "per round fwd | fwd+bwd"
# shellcheck disable=SC2086  # the per-round values are split on purpose
for T in "${T_list[@]}"; do
  af='' ab=''
  if ((aim_ok)); then af=$(median ${fwd[aim-cpu.flash,$T]}); ab=$(median ${fb[aim-cpu.flash,$T]}); fi
  for c in "${all[@]}"; do
    f=$(median ${fwd[$c,$T]}) b=$(median ${fb[$c,$T]})
    xf=- xb=-
    [[ -n $af ]] && xf=$(awk -v a="$af" -v t="$f" 'BEGIN {printf "%.2f", t / a}') \
      && xb=$(awk -v a="$ab" -v t="$b" 'BEGIN {printf "%.2f", t / a}')
    printf '%-6s %-21s %10.2f %8s %11.2f %8s   %s| %s\n' "$T" "$c" "$f" "$xf" "$b" "$xb" "${fwd[$c,$T]}" "${fb[$c,$T]}"
  done
  echo "       load average before/after each round: ${loads[$T]}"
done
echo
echo "memory: peak RSS growth over the baseline process, MiB (includes the 64 MiB flush buffer);"
echo "aim 'fwd+bwd' column = the attention_bwd run; peers' in-process op growth in brackets"
printf '%-6s %-21s %-26s %s\n' T column "fwd (per round)" "fwd+bwd (per round)"
for T in "${T_list[@]}"; do
  for c in "${all[@]}"; do
    gf='' gb=''
    [[ -n ${grow_f[$c,$T]:-} ]] && gf="[${grow_f[$c,$T]% }]" gb="[${grow_fb[$c,$T]% }]"
    printf '%-6s %-21s %-26s %s\n' "$T" "$c" "${memf[$c,$T]}$gf" "${memfb[$c,$T]}$gb"
  done
done
echo "(raw JSON lines appended to $out)"
exit $status
