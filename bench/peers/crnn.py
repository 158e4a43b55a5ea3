"""PyTorch speed peer of aim's CRNN (models/crnn.h): times a training step.

The network is tests/peers/crnn.py's Crnn (the parity peer: same parameter names, TF SAME padding,
BN eps 1e-3, torch.nn.LSTM bidirectional 2 x 256, dropout 0.5, fc 512 -> 37 without bias) at the
benchmarked size of MODELS.md §5.1, on [B, 3, 32, 100] inputs (BGR 0..255, divided by 255 in the
network). Loss = F.ctc_loss over log_softmax, blank = 36, mean over the batch of per-sample losses
(TF's); momentum SGD 0.9, lr 0.01 (the recipe). Batches are random pixel images with random
1..10-character labels, made before timing (aim's step time includes its rendering of the
synthetic text on the prefetch thread).

Run with /usr/bin/python3 (Debian torch):
  crnn.py --batch-size 64 --steps 10 --warmup 2 --threads 2 [--channels-last]
Prints one JSON line (step_time_ms p50/p90/p99 nearest-rank, throughput at p50, environment).
The tuned environment is set by bench/peers/run_crnn.sh (bench/peers/lib.sh).
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
from common import environment, memory, percentile, profile  # noqa: E402


def _load_parity_peer():
    """tests/peers/crnn.py, loaded by path: this file is also named crnn.py."""
    path = os.path.normpath(os.path.join(here, "..", "..", "tests", "peers", "crnn.py"))
    spec = importlib.util.spec_from_file_location("crnn_parity_peer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


peer = _load_parity_peer()
N_BATCHES = 4


def make_batches(batch_size, n, gen):
    out = []
    for _ in range(n):
        lengths = torch.randint(1, 11, (batch_size,), generator=gen)
        label = torch.randint(0, 36, (batch_size, 10), generator=gen)
        label[torch.arange(10).unsqueeze(0) >= lengths.unsqueeze(1)] = -1
        x = torch.randint(0, 256, (batch_size, 3, 32, 100), generator=gen).float()
        out.append({"input": x, "label": label, "label_length": lengths})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", type=int, default=0, help="torch.profiler over N extra steps")
    ap.add_argument("--profile-top", type=int, default=15)
    a = ap.parse_args()
    for name in ("batch_size", "steps", "threads"):
        if getattr(a, name) <= 0:
            ap.error("--%s must be > 0" % name.replace("_", "-"))
    if a.warmup < 0 or not a.lr > 0:
        ap.error("--warmup must be >= 0 and --lr > 0")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = peer.Crnn([64, 128, 256, 256, 512, 512, 512], 256, 2, 37)
    model.train()
    batches = make_batches(a.batch_size, N_BATCHES, torch.Generator().manual_seed(a.seed))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)

    def step(i):
        b = batches[i % len(batches)]
        loss = model.loss(model(b["input"]), b["label"], b["label_length"])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss)  # as aim, which reads the loss back every step

    times, losses = [], []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        lv = step(i)
        dt = (time.perf_counter() - t0) * 1e3
        if not math.isfinite(lv):
            raise SystemExit("crnn.py: loss is %r at step %d" % (lv, i))
        if i >= a.warmup:
            times.append(dt)
            losses.append(lv)
    prof = profile(a, step)
    p50 = percentile(times, 50)
    a.no_set_to_none, a.foreach, a.jit = False, False, False  # the knobs environment() records
    r = {"framework": "pytorch", "model": "crnn", "mode": "train", "batch": a.batch_size,
         "threads": a.threads,
         "step_time_ms": {"p50": p50, "p90": percentile(times, 90), "p99": percentile(times, 99),
                          "mean": sum(times) / len(times)},
         "throughput": a.batch_size / p50 * 1e3, "throughput_unit": "images/s",
         "iterations": len(times), "warmup": a.warmup, "optimizer": "sgd", "momentum": 0.9,
         "lr": a.lr, "first_loss": losses[0], "last_loss": losses[-1], "env": environment(a)}
    if prof:
        r["profile"] = prof
    r["memory"] = memory()
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
