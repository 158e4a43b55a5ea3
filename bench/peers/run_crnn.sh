#!/usr/bin/env bash
# Side-by-side CPU training speed of aim's CRNN and its PyTorch peer (bench/peers/crnn.py).
#
#   bench/peers/run_crnn.sh [BUILD_DIR] [--batch B] [--threads T] [--rounds R] [--steps N]
#                           [--out FILE] [--peer-env tuned|stock]
#
# Defaults: batch 64 (the issue's), 2 threads, 3 rounds, 10 timed steps after 2 warm-up steps,
# momentum SGD 0.9, lr 0.01 (the recipe) on both sides, full size (MODELS.md §5.1). aim's step
# time includes its synthetic text rendering (prefetch thread); the peer's batches are made before
# timing.
# aim and PyTorch alternate per round; the peer runs in the tuned environment of MACHINE.md
# lesson 4 (bench/peers/lib.sh). Output: a table (median over rounds of each run's p50;
# torch/aim = speed-up of aim) and the raw JSON lines appended to --out (default bench-crnn.jsonl).
set -euo pipefail

build=build batch=64 threads=2 rounds=3 steps=10 out=bench-crnn.jsonl peer_env=tuned
peer=crnn.py help_lines=13
set_args() {
  aim_args=(crnn --device cpu --batch-size "$batch" --steps $((steps + 2)) --eval-every 0
            --eval-samples 64 --threads "$threads")
  peer_args=(--batch-size "$batch" --steps "$steps" --warmup 2 --lr 0.01 --threads "$threads")
}
# shellcheck source=train_pair.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/train_pair.sh"
