#!/usr/bin/env bash
# Side-by-side CPU training speed of aim's wide_deep and its PyTorch peer (bench/peers/wide_deep.py).
#
#   bench/peers/run_wide_deep.sh [BUILD_DIR] [--batch B] [--threads T] [--rounds R] [--steps N]
#                                [--out FILE] [--peer-env tuned|stock]
#
# Defaults: batch 1024 (the issue's), 2 threads, 2 rounds, 50 timed steps after 5 warm-up steps,
# the "wide_deep" optimizer (FTRL + Adagrad, TF defaults) on both sides, full size (MODELS.md
# §4.4). aim's step time includes its synthetic batch generation (prefetch thread); the peer's
# batches are made before timing.
# aim and PyTorch alternate per round; the peer runs in the tuned environment of MACHINE.md
# lesson 4 (bench/peers/lib.sh). Output: a table (median over rounds of each run's p50;
# torch/aim = speed-up of aim) and the raw JSON lines appended to --out (default
# bench-wide-deep.jsonl).
set -euo pipefail

build=build batch=1024 threads=2 rounds=2 steps=50 out=bench-wide-deep.jsonl peer_env=tuned
peer=wide_deep.py help_lines=14
set_args() {
  aim_args=(wide_deep --device cpu --batch-size "$batch" --steps $((steps + 5)) --eval-every 0
            --eval-samples 1000 --threads "$threads")
  peer_args=(--batch-size "$batch" --steps "$steps" --warmup 5 --threads "$threads")
}
# shellcheck source=train_pair.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/train_pair.sh"
