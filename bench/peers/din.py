"""PyTorch speed peer of aim's DIN (models/din.h): times a training step or an inference batch.

The network is tests/peers/din.py's Din (the parity peer, same parameter names), at the full
benchmarked size of MODELS.md §4.1: n_mid 63001, n_cat 801, emb 64, attention MLP 80/40, scoring
MLP 80/40, sigmoid activations, BN-as-affine. Batches are synthetic and shaped like aim's generator
(data/din_synthetic.cpp): history lengths uniform in 1..100, padded with id 0 to the batch's
longest history, mask f32, ids uniform within the vocabularies (categories through a fixed
item -> category table), labels 0/1. All batches are generated before timing, so the PyTorch figures
exclude data generation (aim's step time includes it).

Run with /usr/bin/python3 (Debian torch 1.13):
  din.py --mode train --batch-size 256 --steps 60 --warmup 10 --optimizer adam --lr 0.01 --threads 2
  din.py --mode infer --batch-size 1024 --iters 30 --warmup 5 --threads 2 [--jit]
Prints one JSON line on stdout (step_time_ms or latency_ms p50/p90/p99 as nearest-rank
percentiles, like aim's trainer; throughput = samples/s at p50; mean) with the environment the run
saw. --profile N also runs N extra profiled iterations under torch.profiler after timing and
prints the top ops (self CPU time) to stderr and into the JSON ("profile").
The tuned environment this peer is meant to run under is set by bench/peers/run_din.sh; see
bench/peers/README.md for the knobs and their effect.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import environment, make_optimizer, memory, percentile, profile  # noqa: E402


def _load_parity_peer():
    """tests/peers/din.py, loaded by path: this file is also named din.py, so no plain import."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "peers", "din.py")
    spec = importlib.util.spec_from_file_location("din_parity_peer", os.path.normpath(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


Din = _load_parity_peer().Din  # the parity peer: one definition of the network


class DinSplit(Din):
    """aim's att=split (models/din.h): the same function and parameters, with the attention FC1
    weight W = [Wq | Wk | Wd | Wp] regrouped so the per-position GEMM has K = 2H instead of 4H:
    q Wq' + k Wk' + (q - k) Wd' + (q k) Wp' = q (Wq + Wd)' + [k, q k] [Wk - Wd | Wp]'."""

    def per_position(self, q, k, w_k, w_p):
        """[k, q k] [w_k | w_p]': [B, T, A]."""
        return F.linear(torch.cat([k, q.unsqueeze(1) * k], -1), torch.cat([w_k, w_p], 1))

    def forward(self, item, cate, hist_item, hist_cate, mask):
        H = self.H
        q = torch.cat([self.item_emb(item), self.cate_emb(cate)], -1)
        k = torch.cat([self.item_emb(hist_item), self.cate_emb(hist_cate)], -1)
        fc1, w = self.att[0], self.att[0].weight
        wd = w[:, 2 * H:3 * H]
        w_q = w[:, :H] + wd
        x = self.per_position(q, k, w[:, H:2 * H] - wd, w[:, 3 * H:]) + F.linear(q, w_q, fc1.bias).unsqueeze(1)
        for layer in list(self.att)[1:]:
            x = layer(x)
        s = x.squeeze(-1)
        s = torch.where(mask > 0, s, torch.full_like(s, -2.0 ** 32 + 1))
        s = s / math.sqrt(H)
        wgt = torch.softmax(s, 1)
        h = torch.bmm(wgt.unsqueeze(1), k).squeeze(1)
        u = self.hist_fcn(self.bn(self.hist_bn, h))
        out = self.mlp(self.bn(self.b1, torch.cat([u, q], -1))).squeeze(-1)
        return out + self.item_b[item]


class DinFold(DinSplit):
    """aim's att=fold (models/din.h): split's per-position product with q folded into per-row
    weights, [k, q k] [w_k | w_p]' = k (w_k + diag(q) w_p)': one bmm with K = H."""

    def per_position(self, q, k, w_k, w_p):
        w_b = w_k.unsqueeze(0) + q.unsqueeze(1) * w_p.unsqueeze(0)  # [B, A, H]
        return torch.bmm(k, w_b.transpose(1, 2))


# MODELS.md §4.1, as aim's DinConfig defaults.
N_MID, N_CAT, EMB, ATT, MLP, MAX_HIST = 63001, 801, 64, [80, 40], [80, 40], 100
N_BATCHES = 8  # distinct pre-generated batches, cycled (the longest history varies per batch)


def make_batches(batch_size, n, gen):
    """n synthetic batches shaped like aim's RecBatch (see the module docstring)."""
    # Items 0..N_CAT-1 get category = id so no category is empty, the rest uniform (as aim).
    item_cate = torch.randint(0, N_CAT, (N_MID,), generator=gen)
    item_cate[:N_CAT] = torch.arange(N_CAT)
    out = []
    for _ in range(n):
        lengths = torch.randint(1, MAX_HIST + 1, (batch_size,), generator=gen)
        T = int(lengths.max())
        mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).float()
        hist_item = torch.randint(0, N_MID, (batch_size, T), generator=gen) * mask.long()
        hist_cate = item_cate[hist_item] * mask.long()
        item = torch.randint(0, N_MID, (batch_size,), generator=gen)
        out.append({"item": item, "cate": item_cate[item], "hist_item": hist_item, "hist_cate": hist_cate,
                    "mask": mask, "label": torch.randint(0, 2, (batch_size,), generator=gen)})
    return out


def run_train(args, model, batches):
    model.train()
    opt = make_optimizer(args.optimizer, model.parameters(), args.lr, args.foreach)
    set_to_none = not args.no_set_to_none
    fwd = torch.compile(model) if args.compile else model

    def step(b):
        logits = fwd(b["item"], b["cate"], b["hist_item"], b["hist_cate"], b["mask"])
        loss = Din.loss(logits, b["label"])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)
        return float(loss)  # as aim, which reads the loss back every step

    if args.compile:
        for b in batches:  # compile every history length before the timed loop
            step(b)
    times, losses = [], []
    for i in range(args.warmup + args.steps):
        b = batches[i % len(batches)]
        t0 = time.perf_counter()
        loss = step(b)
        dt = (time.perf_counter() - t0) * 1e3
        if not math.isfinite(loss):
            raise SystemExit("din.py: loss is %r at step %d; stopping" % (loss, i))
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
            traced = torch.jit.trace(model, (b["item"], b["cate"], b["hist_item"], b["hist_cate"], b["mask"]))
            fwd = torch.jit.optimize_for_inference(torch.jit.freeze(traced))
    elif args.compile:
        fwd = torch.compile(model)

    def once(b):
        with torch.inference_mode():
            return torch.sigmoid(fwd(b["item"], b["cate"], b["hist_item"], b["hist_cate"], b["mask"]))

    if args.compile:
        for b in batches:  # compile every history length before the timed loop
            once(b)
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
        raise SystemExit("din.py: non-finite probabilities in inference")
    prof = profile(args, lambda i: once(batches[i % len(batches)]))
    return times, prof, {"mean_prob": checksum / (args.iters * args.batch_size)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["train", "infer"], required=True)
    ap.add_argument("--batch-size", type=int, default=None, help="default 256 (train), 1024 (infer)")
    ap.add_argument("--steps", type=int, default=60, help="timed training steps")
    ap.add_argument("--iters", type=int, default=30, help="timed inference batches")
    ap.add_argument("--warmup", type=int, default=None, help="untimed first iterations (default 10 / 5)")
    ap.add_argument("--optimizer", choices=["adam", "sgd", "adagrad", "adamw"], default="adam")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (also the OpenMP BLAS pool)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--att", choices=["fold", "split", "concat"], default="fold",
                    help="attention FC1 formulation (as aim's --config att=; same function)")
    ap.add_argument("--foreach", action="store_true", help="multi-tensor optimizer (foreach=True)")
    ap.add_argument("--no-set-to-none", action="store_true", help="zero_grad writes zeros instead of freeing")
    ap.add_argument("--jit", action="store_true", help="infer: torch.jit.trace + freeze + optimize_for_inference")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model (Inductor, default mode); every cycled batch runs once, "
                         "untimed, before the warm-up, so each history length is compiled before timing")
    ap.add_argument("--profile", type=int, default=0, help="extra profiled iterations (0: none)")
    ap.add_argument("--profile-top", type=int, default=12)
    a = ap.parse_args()
    if a.batch_size is None:
        a.batch_size = 256 if a.mode == "train" else 1024
    if a.warmup is None:
        a.warmup = 10 if a.mode == "train" else 5
    for name in ("batch_size", "steps", "iters", "threads"):
        if getattr(a, name) <= 0:
            ap.error("--%s must be > 0, got %d" % (name.replace("_", "-"), getattr(a, name)))
    if a.warmup < 0 or a.profile < 0 or not a.lr > 0:
        ap.error("--warmup and --profile must be >= 0 and --lr > 0")
    if a.compile and not hasattr(torch, "compile"):
        ap.error("--compile needs torch >= 2.0 (this is %s)" % torch.__version__)
    if a.compile and a.jit:
        ap.error("--compile and --jit are two ways of compiling: choose one")


    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = {"split": DinSplit, "fold": DinFold, "concat": Din}[a.att](N_MID, N_CAT, EMB, ATT, MLP, act="sigmoid", bn_train=False)
    batches = make_batches(a.batch_size, N_BATCHES, torch.Generator().manual_seed(a.seed))

    if a.mode == "train":
        times, prof, extra = run_train(a, model, batches)
        key = "step_time_ms"
    else:
        times, prof, extra = run_infer(a, model, batches)
        key = "latency_ms"
    p50 = percentile(times, 50)
    r = {"framework": "pytorch", "model": "din", "mode": a.mode, "att": a.att, "batch": a.batch_size,
         "threads": a.threads,
         key: {"p50": p50, "p90": percentile(times, 90), "p99": percentile(times, 99),
               "mean": sum(times) / len(times)},
         "throughput": a.batch_size / p50 * 1e3, "throughput_unit": "samples/s",
         "iterations": len(times), "warmup": a.warmup,
         "hist_len_max": [int(b["hist_item"].shape[1]) for b in batches]}
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
