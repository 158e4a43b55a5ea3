#!/usr/bin/env bash
# Side-by-side CPU training speed of aim's DIEN and its PyTorch peer (bench/peers/dien.py).
#
#   bench/peers/run_dien.sh [BUILD_DIR] [--batch B] [--threads T] [--rounds R] [--steps N]
#                           [--out FILE] [--peer-env tuned|stock]
#
# Defaults: batch 256 (the issue's), 2 threads, 2 rounds, 20 timed steps after 3 warm-up steps,
# Adam lr 0.001 (the recipe) on both sides, full size (MODELS.md §4.2). aim's step time includes
# its synthetic batch generation (prefetch thread); the peer's batches are made before timing.
# aim and PyTorch alternate per round; the peer runs in the tuned environment of MACHINE.md
# lesson 4 (bench/peers/lib.sh). Output: a table (median over rounds of each run's p50;
# torch/aim = speed-up of aim) and the raw JSON lines appended to --out (default bench-dien.jsonl).
set -euo pipefail

build=build batch=256 threads=2 rounds=2 steps=20 out=bench-dien.jsonl peer_env=tuned
peer=dien.py help_lines=12
set_args() {
  aim_args=(dien --device cpu --batch-size "$batch" --steps $((steps + 3)) --eval-every 0
            --eval-samples 1000 --optimizer adam --lr 0.001 --threads "$threads")
  peer_args=(--batch-size "$batch" --steps "$steps" --warmup 3 --lr 0.001 --threads "$threads")
}
# shellcheck source=train_pair.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/train_pair.sh"
