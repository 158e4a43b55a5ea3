"""PyTorch speed peer of aim's NCF (models/ncf.h): times a training step or an inference batch.

The network is tests/peers/ncf.py's Ncf (the parity peer, same parameter names): NeuMF at the
benchmarked size of MODELS.md §4.3 (6040 users, 3706 items, four 16-wide one-hot layers computed
as embedding gathers + bias + ReLU, MLP 32-16-8, predict 24 -> 1), dense embedding gradients.
Batches are synthetic and shaped like aim's (data/ncf_data.h): user and item ids i64 [B], labels
in the training stream's pattern (a positive then 4 negatives); ids uniform. All batches are
generated before timing, so the figures exclude data generation (aim's step time excludes it too:
its batches come from the prefetching loader thread).

Run with /usr/bin/python3 (Debian torch 1.13):
  ncf.py --mode train --batch-size 256 --steps 200 --warmup 20 --optimizer adam --lr 0.001 --threads 2
  ncf.py --mode infer --batch-size 100 --iters 200 --warmup 20 --threads 2 [--jit]
Prints one JSON line on stdout (step_time_ms or latency_ms p50/p90/p99 as nearest-rank
percentiles, like aim's trainer; throughput = samples/s at p50; mean) with the environment the run
saw. --profile N also runs N extra profiled iterations under torch.profiler and prints the top ops
(self CPU time) to stderr and into the JSON ("profile"). The tuned environment this peer is meant
to run under is set by bench/peers/run_ncf.sh (bench/peers/lib.sh, README.md).
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import environment, make_optimizer, memory, percentile, profile  # noqa: E402


def _load_parity_peer():
    """tests/peers/ncf.py, loaded by path: this file is also named ncf.py, so no plain import."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "peers", "ncf.py")
    spec = importlib.util.spec_from_file_location("ncf_parity_peer", os.path.normpath(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


Ncf = _load_parity_peer().Ncf  # the parity peer: one definition of the network

# MODELS.md §4.3, as aim's NcfConfig defaults.
N_USERS, N_ITEMS, EMB, MLP = 6040, 3706, 16, [32, 16, 8]
N_BATCHES = 8  # distinct pre-generated batches, cycled


def make_batches(batch_size, n, gen):
    out = []
    for _ in range(n):
        label = (torch.arange(batch_size) % 5 == 0).long()  # a positive then 4 negatives
        out.append({"user": torch.randint(0, N_USERS, (batch_size,), generator=gen),
                    "item": torch.randint(0, N_ITEMS, (batch_size,), generator=gen), "label": label})
    return out


def run_train(args, model, batches):
    model.train()
    opt = make_optimizer(args.optimizer, model.parameters(), args.lr, args.foreach)
    set_to_none = not args.no_set_to_none

    def step(b):
        loss = Ncf.loss(model(b["user"], b["item"]), b["label"])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)
        return float(loss)  # as aim, which reads the loss back every step

    times, losses = [], []
    for i in range(args.warmup + args.steps):
        b = batches[i % len(batches)]
        t0 = time.perf_counter()
        loss = step(b)
        dt = (time.perf_counter() - t0) * 1e3
        if not math.isfinite(loss):
            raise SystemExit("ncf.py: loss is %r at step %d; stopping" % (loss, i))
        if i >= args.warmup:
            times.append(dt)
            losses.append(loss)
    prof = profile(args, lambda i: step(batches[i % len(batches)]))
    return times, prof, {"first_loss": losses[0], "last_loss": losses[-1]}


def run_infer(args, model, batches):
    model.eval()
    fwd = model
    if args.jit:
        b = batches[0]
        with torch.no_grad():
            traced = torch.jit.trace(model, (b["user"], b["item"]))
            fwd = torch.jit.optimize_for_inference(torch.jit.freeze(traced))

    def once(b):
        with torch.inference_mode():
            return torch.sigmoid(fwd(b["user"], b["item"]))

    times = []
    checksum = 0.0
    for i in range(args.warmup + args.iters):
        b = batches[i % len(batches)]
        t0 = time.perf_counter()
        p = once(b)
        dt = (time.perf_counter() - t0) * 1e3
        if i >= args.warmup:
            times.append(dt)
            checksum += float(p.sum())
    if not math.isfinite(checksum):
        raise SystemExit("ncf.py: non-finite scores in inference")
    prof = profile(args, lambda i: once(batches[i % len(batches)]))
    return times, prof, {"mean_prob": checksum / (args.iters * args.batch_size)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["train", "infer"], required=True)
    ap.add_argument("--batch-size", type=int, default=None, help="default 256 (train), 100 (infer)")
    ap.add_argument("--steps", type=int, default=200, help="timed training steps")
    ap.add_argument("--iters", type=int, default=200, help="timed inference batches")
    ap.add_argument("--warmup", type=int, default=20, help="untimed first iterations")
    ap.add_argument("--optimizer", choices=["adam", "sgd", "adagrad", "adamw"], default="adam")
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (also the OpenMP BLAS pool)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--foreach", action="store_true", help="multi-tensor optimizer (foreach=True)")
    ap.add_argument("--no-set-to-none", action="store_true", help="zero_grad writes zeros instead of freeing")
    ap.add_argument("--jit", action="store_true", help="infer: torch.jit.trace + freeze + optimize_for_inference")
    ap.add_argument("--profile", type=int, default=0, help="extra profiled iterations (0: none)")
    ap.add_argument("--profile-top", type=int, default=12)
    a = ap.parse_args()
    if a.batch_size is None:
        a.batch_size = 256 if a.mode == "train" else 100
    for name in ("batch_size", "steps", "iters", "threads"):
        if getattr(a, name) <= 0:
            ap.error("--%s must be > 0, got %d" % (name.replace("_", "-"), getattr(a, name)))
    if a.warmup < 0 or a.profile < 0 or not a.lr > 0:
        ap.error("--warmup and --profile must be >= 0 and --lr > 0")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = Ncf(N_USERS, N_ITEMS, EMB, MLP)
    batches = make_batches(a.batch_size, N_BATCHES, torch.Generator().manual_seed(a.seed))
    if a.mode == "train":
        times, prof, extra = run_train(a, model, batches)
        key = "step_time_ms"
    else:
        times, prof, extra = run_infer(a, model, batches)
        key = "latency_ms"
    p50 = percentile(times, 50)
    r = {"framework": "pytorch", "model": "ncf", "mode": a.mode, "batch": a.batch_size, "threads": a.threads,
         key: {"p50": p50, "p90": percentile(times, 90), "p99": percentile(times, 99),
               "mean": sum(times) / len(times)},
         "throughput": a.batch_size / p50 * 1e3, "throughput_unit": "samples/s",
         "iterations": len(times), "warmup": a.warmup}
    if a.mode == "train":
        r["optimizer"], r["lr"] = a.optimizer, a.lr
    r.update(extra)
    r["env"] = environment(a)
    if prof is not None:
        r["profile"] = prof
    r["memory"] = memory()
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
