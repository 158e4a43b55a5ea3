"""PyTorch peer of aim's ssd_vgg16 speed (bench/peers/run_cnn.sh --model ssd_vgg16): torchvision's
ssd300_vgg16 (weights=None, 21 classes) on random 300x300 images in [0, 1].

Training: the model's loss dict summed (its MultiBox loss with SSDMatcher and hard negatives),
momentum SGD (0.9, lr, weight decay 5e-4: MODELS.md §6.1), 1-6 random boxes per image.
Inference (--heads): the backbone and heads only, as aim-infer measures; without --heads the full
eval forward including torchvision's transform and post-processing (NMS).
Prints one JSON line (step_time_ms or latency_ms p50/p90/p99) as cnn.py.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
from torchvision.models.detection import ssd300_vgg16

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import environment, memory, percentile  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="ssd_vgg16", choices=["ssd_vgg16"])
    ap.add_argument("--mode", choices=["train", "infer"], required=True)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--image", type=int, default=300)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--heads", action="store_true", help="infer: backbone + heads only")
    a = ap.parse_args()
    a.no_set_to_none, a.foreach, a.jit = False, False, False  # common.environment's knobs
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = ssd300_vgg16(weights=None, weights_backbone=None, num_classes=21)
    g = torch.Generator().manual_seed(a.seed)
    S = a.image

    def targets():
        out = []
        for _ in range(a.batch_size):
            n = int(torch.randint(1, 7, (1,), generator=g))
            xy = torch.rand(n, 2, generator=g) * (S * 0.7)
            wh = torch.rand(n, 2, generator=g) * (S * 0.3) + 8
            out.append({"boxes": torch.cat([xy, xy + wh], 1),
                        "labels": torch.randint(1, 21, (n,), generator=g)})
        return out
    batches = [([torch.rand(3, S, S, generator=g) for _ in range(a.batch_size)], targets())
               for _ in range(2)]
    times = []
    if a.mode == "train":
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)

        def step(i):
            x, t = batches[i % 2]
            loss = sum(model(x, t).values())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return float(loss)
        fn, n, key = step, a.steps, "step_time_ms"
    else:
        model.eval()
        stacked = [torch.stack(x) for x, _ in batches]

        def step(i):
            with torch.inference_mode():
                if a.heads:
                    feats = list(model.backbone(model.transform(batches[i % 2][0])[0].tensors).values())
                    h = model.head(feats)
                    return float(h["cls_logits"].sum())
                return float(sum(d["scores"].sum() for d in model(list(stacked[i % 2]))))
        fn, n, key = step, a.iters, "latency_ms"
    for i in range(a.warmup + n):
        t0 = time.perf_counter()
        v = fn(i)
        dt = (time.perf_counter() - t0) * 1e3
        if not math.isfinite(v):
            raise SystemExit("ssd.py: non-finite value at iteration %d" % i)
        if i >= a.warmup:
            times.append(dt)
    p50 = percentile(times, 50)
    r = {"framework": "pytorch", "model": a.model, "mode": a.mode, "batch": a.batch_size, "image": S,
         "threads": a.threads, "heads_only": a.heads,
         key: {"p50": p50, "p90": percentile(times, 90), "p99": percentile(times, 99),
               "mean": sum(times) / len(times)},
         "throughput": a.batch_size / p50 * 1e3, "throughput_unit": "images/s",
         "iterations": len(times), "warmup": a.warmup, "env": environment(a)}
    r["memory"] = memory()
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
