"""PyTorch speed peer of aim's wide_deep (models/wide_deep.h): times a training step.

The network is tests/peers/wide_deep.py's WideDeep (the parity peer, same names): wide part
F.embedding_bag over 8 ids per row into a [3050, 1] table + bias, deep part 51-100-75-50-25 ReLU ->
1. The optimizer is aim's "wide_deep": TF's FTRL (lr 0.2, power -0.5, accumulator 0.1, l1 = l2 = 0)
for the wide parameters, written with torch tensor ops and persistent state, and
torch.optim.Adagrad(lr 0.05, initial_accumulator_value 0.1) for the rest. Batches are synthetic
(ids uniform over the wide vocabulary, dense features N(0, 1), occupation uniform), generated before
timing (aim's step time includes its data generation in the prefetch thread).

Run with /usr/bin/python3:  wide_deep.py --batch-size 1024 --steps 50 --warmup 5 --threads 2
Prints one JSON line (step_time_ms p50/p90/p99 nearest-rank, throughput at p50, environment).
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
from common import environment, memory, percentile  # noqa: E402


def _load_parity_peer():
    """tests/peers/wide_deep.py, loaded by path: this file has the same name."""
    path = os.path.normpath(os.path.join(here, "..", "..", "tests", "peers", "wide_deep.py"))
    spec = importlib.util.spec_from_file_location("wide_deep_parity_peer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


peer = _load_parity_peer()


class Ftrl:
    """TF FtrlOptimizer (learning_rate_power -0.5, l1 = l2 = 0) with per-parameter state."""

    def __init__(self, params, lr=0.2, init_acc=0.1):
        self.params, self.lr = list(params), lr
        self.n = [torch.full_like(p, init_acc) for p in self.params]
        self.z = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self):
        for p, n, z in zip(self.params, self.n, self.z):
            g = p.grad
            n1 = n + g * g
            z.add_(g - (n1.sqrt() - n.sqrt()) / self.lr * p)
            n.copy_(n1)
            p.copy_(-z / (n1.sqrt() / self.lr))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    for name in ("batch_size", "steps", "threads"):
        if getattr(a, name) <= 0:
            ap.error("--%s must be > 0" % name.replace("_", "-"))
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    m = peer.WideDeep()
    m.train()
    B = a.batch_size
    batches = [{"wide": torch.randint(0, peer.WIDE_PAD, (B, 8), generator=gen),
                "dense": torch.randn(B, 43, generator=gen),
                "occupation": torch.randint(0, 1000, (B,), generator=gen),
                "label": torch.randint(0, 2, (B,), generator=gen)} for _ in range(8)]
    wide = [p for n, p in m.named_parameters() if n.startswith("wide.")]
    deep = [p for n, p in m.named_parameters() if not n.startswith("wide.")]
    ftrl = Ftrl(wide)
    adagrad = torch.optim.Adagrad(deep, lr=0.05, initial_accumulator_value=0.1, eps=1e-10)
    times, losses = [], []
    for i in range(a.warmup + a.steps):
        b = batches[i % len(batches)]
        t0 = time.perf_counter()
        loss = peer.WideDeep.loss(m(b["wide"], b["dense"], b["occupation"]), b["label"])
        loss.backward()
        adagrad.step()
        ftrl.step()
        m.zero_grad(set_to_none=True)
        lv = float(loss)  # as aim, which reads the loss back every step
        dt = (time.perf_counter() - t0) * 1e3
        if not math.isfinite(lv):
            raise SystemExit("wide_deep.py: loss is %r at step %d" % (lv, i))
        if i >= a.warmup:
            times.append(dt)
            losses.append(lv)
    p50 = percentile(times, 50)
    a.no_set_to_none, a.foreach, a.jit = False, False, False  # the knobs environment() records
    r = {"framework": "pytorch", "model": "wide_deep", "mode": "train", "batch": B, "threads": a.threads,
         "step_time_ms": {"p50": p50, "p90": percentile(times, 90), "p99": percentile(times, 99),
                          "mean": sum(times) / len(times)},
         "throughput": B / p50 * 1e3, "throughput_unit": "samples/s", "iterations": len(times),
         "warmup": a.warmup, "optimizer": "wide_deep (ftrl + adagrad)", "first_loss": losses[0],
         "last_loss": losses[-1], "env": environment(a)}
    r["memory"] = memory()
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
