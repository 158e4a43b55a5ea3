# Shared by the side-by-side scripts (run_din.sh, run_cnn.sh, train_pair.sh): the tuned peer environment, one
# number out of a JSON line, the median, and a run that fails loudly. Sourced after the caller
# has set: threads, peer_env, python; it defines peer_cmd, jget, median, run_one.

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

# run_one NAME LOG -- CMD...: runs CMD (stdout and stderr to LOG), fails loudly with the log tail if it fails.
run_one() {
  local name=$1 log=$2; shift 3
  echo "  $name: $*" | cut -c1-220 >&2
  if ! "$@" > "$log" 2>&1; then
    echo "${0##*/}: $name failed; last lines of its log:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
}


# compare_mode PEER_SCRIPT: R rounds of aim and the peer alternating for one mode; reads mode,
# batch, key, aim_bin, aim_args, peer_args, rounds, tmp, out; appends a row to rows and sets
# status=3 when aim's binary is missing.
compare_mode() {
  local peer_script=$1 r res a t
  local aim_ok aim_p50 torch_p50
  aim_ok=1
  if [[ ! -x $aim_bin ]]; then
    echo "${0##*/}: MISSING $aim_bin: aim's $mode side is not built; running only the peer" >&2
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
    run_one "torch $mode round $r" "$res" -- "${peer_cmd[@]}" "$python" "$peer_script" "${peer_args[@]}"
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
}
