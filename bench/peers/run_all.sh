#!/usr/bin/env bash
# Every model that has a PyTorch peer, training step and inference, side by side on this machine
# (issue 25), and the table docs/performance.md written from the runs' JSON lines.
#
#   bench/peers/run_all.sh [BUILD_DIR] [--rounds R] [--threads T] [--models m1,m2,...]
#                          [--peer-python PY] [--doc FILE] [--keep DIR]
#
# Per model it calls that model's side-by-side script (run_din.sh, run_dien.sh, run_ncf.sh,
# run_wide_deep.sh, run_crnn.sh, run_bert.sh, run_cnn.sh --model M for the CNN classifiers and
# ssd_vgg16) with the same rounds and threads: inside each mode aim and the peer alternate (aim,
# torch, aim, torch, ...), so drift on a shared machine hits both. The measured FMA peak
# (aim-bench peak) is taken first, for the %roof column (aim's analytic GFLOP/s over it).
# --peer-python (default Debian's /usr/bin/python3 with torch 1.13) reaches the scripts that take
# it (run_cnn.sh): e.g. /work/venv-torch/bin/python for PyPI's current torch.
# The table (model, mode, batch, aim p50 ms, PyTorch p50 ms, torch/aim, aim GFLOP/s, %roof,
# aim's peak bytes in a step, both processes' peak RSS) goes to --doc (default
# docs/performance.md) with the commit, the machine and the command; every raw JSON line is kept in
# --keep (default a temporary folder, removed). A model whose script fails is a row saying so
# (its log tail is printed); the exit status is then 1.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=build rounds=3 threads=2 peer_python=/usr/bin/python3 doc=$repo/docs/performance.md keep=""
models=din,dien,ncf,wide_deep,crnn,bert,resnet50,resnet152,vgg16,densenet121,googlenet,alexnet,squeezenet,synnet,ssd_vgg16
die() { echo "run_all.sh: $*" >&2; exit 1; }
invocation="bench/peers/run_all.sh $*"
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --models) models=${2:?--models needs a value}; shift 2 ;;
    --peer-python) peer_python=${2:?--peer-python needs a value}; shift 2 ;;
    --doc) doc=${2:?--doc needs a value}; shift 2 ;;
    --keep) keep=${2:?--keep needs a value}; shift 2 ;;
    -h | --help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build=$1; shift ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer, got '$rounds'"
[[ $threads =~ ^[1-9][0-9]*$ ]] || die "--threads must be a positive integer, got '$threads'"
[[ -d $build ]] || die "build directory '$build' does not exist (build aim-train/aim-infer/aim-bench first)"
build=$(cd "$build" && pwd)
[[ -x $build/aim-bench ]] || die "$build/aim-bench missing (the %roof column needs its measured peak)"
[[ -x $peer_python ]] || die "--peer-python '$peer_python' is not an executable"
if [[ -n $keep ]]; then
  mkdir -p "$keep"
  tmp=$(cd "$keep" && pwd)
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
fi

OMP_NUM_THREADS=$threads "$build/aim-bench" peak --results "$tmp/peak.jsonl" > "$tmp/peak.log" 2>&1 ||
  die "aim-bench peak failed: $(tail -3 "$tmp/peak.log")"

status=0
for m in ${models//,/ }; do
  common=(--rounds "$rounds" --threads "$threads" --out "$tmp/$m.jsonl")
  case $m in
    din | dien | ncf | wide_deep | crnn) cmd=("$here/run_$m.sh" "$build" "${common[@]}") ;;
    bert) cmd=("$here/run_bert.sh" "$build" "${common[@]}") ;;
    resnet50 | resnet152 | vgg16 | densenet121 | googlenet | alexnet | squeezenet | synnet | ssd_vgg16)
      size=(--batch 16)
      [[ $m == ssd_vgg16 ]] && size=(--batch 8 --image 300)  # SSD300
      cmd=("$here/run_cnn.sh" "$build" --model "$m" "${size[@]}" --peer-python "$peer_python"
           "${common[@]}") ;;
    *) die "no side-by-side script for model '$m' (known: the default --models list)" ;;
  esac
  echo "== $m: ${cmd[*]}" >&2
  if ! "${cmd[@]}" > "$tmp/$m.log" 2>&1; then
    echo "run_all.sh: $m failed; last lines of its log:" >&2
    tail -15 "$tmp/$m.log" >&2
    echo "$m" >> "$tmp/failed.txt"
    status=1
  fi
done

/usr/bin/python3 "$here/summarize.py" --dir "$tmp" --models "$models" --doc "$doc" \
  --command "$invocation" --threads "$threads" --rounds "$rounds" \
  --peer-python "$peer_python"
echo "table written to $doc" >&2
exit $status
