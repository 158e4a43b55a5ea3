# The body of the one-model training comparisons (run_dien.sh, run_wide_deep.sh, run_crnn.sh):
# their common flags, the checks, the alternating aim/PyTorch rounds (lib.sh compare_mode) and the
# table. Sourced by a script that has set the defaults (build batch threads rounds steps out
# peer_env), `peer` (the peer script's file name), `help_lines` (its header's last line) and a
# function set_args that fills aim_args and peer_args from the parsed values. Common flags: --batch,
# --threads, --rounds, --steps, --out, --peer-env tuned|stock, --peer-python PY (the peer's Python,
# default Debian's /usr/bin/python3; e.g. /work/venv-torch/bin/python for PyPI's torch).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=$(basename "$0")
die() { echo "$script: $*" >&2; exit 1; }
peer_python=/usr/bin/python3
while [[ $# -gt 0 ]]; do
  case $1 in
    --batch) batch=${2:?--batch needs a value}; shift 2 ;;
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --steps) steps=${2:?--steps needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --peer-env) peer_env=${2:?--peer-env needs a value}; shift 2 ;;
    --peer-python) peer_python=${2:?--peer-python needs a value}; shift 2 ;;
    -h | --help) sed -n "2,${help_lines}p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
python=${peer_python:-/usr/bin/python3}
[[ -x $python ]] || die "$python not found (the peer needs a Python with torch: Debian's python3-torch)"
# shellcheck source=lib.sh
source "$here/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
rows=()
mode=train key=step_time_ms aim_bin=$build/aim-train
set_args
compare_mode "$here/$peer"

echo
printf '%-6s %6s %12s %12s %11s   %s\n' mode batch "aim p50 ms" "torch p50 ms" "torch/aim" "per-round p50 (ms)"
printf '%s\n' "${rows[@]}"
echo "raw JSON lines appended to $out"
exit $status
