"""PyTorch speed peer of aim's DIEN (models/dien.h): times a training step.

The network is tests/peers/dien.py's Dien (the parity peer: same parameter names, the TF-style GRU
and AUGRU written step by step, as no torch module computes them), at the full benchmarked size of
MODELS.md §4.2: uid 543060, mid 367983, cat 1601, embeddings 18, hidden 36, attention MLP 80/40,
aux net 100/50, head 200/80 with Dice. Loss = 2-way CTR cross-entropy + auxiliary loss, Adam.
Batches are synthetic and shaped like aim's generator (data/dien_synthetic.h): history lengths
uniform in 1..100, padded to the batch's longest history, mask f32, ids uniform within the
vocabularies, no-click histories uniform items. All batches are generated before timing (aim's
step time includes its data generation in the prefetch thread).

Run with /usr/bin/python3 (Debian torch):
  dien.py --batch-size 256 --steps 20 --warmup 3 --lr 0.001 --threads 2
Prints one JSON line (step_time_ms p50/p90/p99 nearest-rank, throughput at p50, environment).
The tuned environment is set by bench/peers/run_dien.sh (bench/peers/lib.sh).
"""
import argparse
import importlib.util
import json
import math
import os
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "parity"))
from common import environment, make_optimizer, memory, percentile  # noqa: E402


def _load_parity_peer():
    """tests/peers/dien.py, loaded by path: this file is also named dien.py."""
    path = os.path.normpath(os.path.join(here, "..", "..", "tests", "peers", "dien.py"))
    spec = importlib.util.spec_from_file_location("dien_parity_peer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


peer = _load_parity_peer()
N_UID, N_MID, N_CAT, E, H = 543060, 367983, 1601, 18, 36
ATT, AUX, MLP, MAX_HIST, N_BATCHES = [80, 40], [100, 50], [200, 80], 100, 8


def make_batches(batch_size, n, gen):
    item_cate = torch.randint(0, N_CAT, (N_MID,), generator=gen)
    out = []
    for _ in range(n):
        lengths = torch.randint(1, MAX_HIST + 1, (batch_size,), generator=gen)
        T = int(lengths.max())
        mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).float()
        hist = torch.randint(0, N_MID, (batch_size, T), generator=gen) * mask.long()
        noclk = torch.randint(0, N_MID, (batch_size, T), generator=gen) * mask.long()
        item = torch.randint(0, N_MID, (batch_size,), generator=gen)
        out.append({"uid": torch.randint(0, N_UID, (batch_size,), generator=gen), "item": item,
                    "cate": item_cate[item], "hist_item": hist, "hist_cate": item_cate[hist] * mask.long(),
                    "noclk_item": noclk, "noclk_cate": item_cate[noclk] * mask.long(), "mask": mask,
                    "label": torch.randint(0, 2, (batch_size,), generator=gen)})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--foreach", action="store_true", help="multi-tensor Adam")
    a = ap.parse_args()
    for name in ("batch_size", "steps", "threads"):
        if getattr(a, name) <= 0:
            ap.error("--%s must be > 0" % name.replace("_", "-"))
    if a.warmup < 0 or not a.lr > 0:
        ap.error("--warmup must be >= 0 and --lr > 0")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = peer.Dien(N_UID, N_MID, N_CAT, E, H, ATT, AUX, MLP)
    model.train()
    batches = make_batches(a.batch_size, N_BATCHES, torch.Generator().manual_seed(a.seed))
    opt = make_optimizer("adam", model.parameters(), a.lr, a.foreach)
    times, losses = [], []
    for i in range(a.warmup + a.steps):
        b = batches[i % len(batches)]
        t0 = time.perf_counter()
        logits, h, e = model(b)
        loss = peer.Dien.ctr_loss(logits, b["label"]) + model.aux_loss(b, h, e)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        lv = float(loss)  # as aim, which reads the loss back every step
        dt = (time.perf_counter() - t0) * 1e3
        if not math.isfinite(lv):
            raise SystemExit("dien.py: loss is %r at step %d" % (lv, i))
        if i >= a.warmup:
            times.append(dt)
            losses.append(lv)
    p50 = percentile(times, 50)
    a.no_set_to_none, a.jit = False, False  # the knobs environment() records
    r = {"framework": "pytorch", "model": "dien", "mode": "train", "batch": a.batch_size,
         "threads": a.threads,
         "step_time_ms": {"p50": p50, "p90": percentile(times, 90), "p99": percentile(times, 99),
                          "mean": sum(times) / len(times)},
         "throughput": a.batch_size / p50 * 1e3, "throughput_unit": "samples/s",
         "iterations": len(times), "warmup": a.warmup, "optimizer": "adam", "lr": a.lr,
         "first_loss": losses[0], "last_loss": losses[-1], "env": environment(a)}
    r["memory"] = memory()
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
