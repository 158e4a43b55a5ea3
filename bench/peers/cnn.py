"""PyTorch speed peer of aim's CNN classifiers (models/resnet.h, plain_cnn.h): times a training
step (forward, cross-entropy, backward, momentum SGD) or an inference batch of torchvision's model.

Inputs are synthetic (random images and labels made before timing), NCHW float32, as aim's.
Run with /usr/bin/python3 (Debian torch 1.13, torchvision 0.14):
  cnn.py --model resnet50 --mode train --batch-size 16 --steps 10 --warmup 3 --threads 2
  cnn.py --model resnet50 --mode infer --batch-size 16 --iters 10 --warmup 3 --threads 2
  [--channels-last] [--jit] [--compile] [--profile N]
Prints one JSON line (step_time_ms or latency_ms p50/p90/p99, throughput in images/s at p50) with
the environment the run saw. bench/peers/run_cnn.sh runs it beside aim in the tuned environment
of MACHINE.md (bench/peers/README.md).
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import environment, make_optimizer, memory, percentile, profile  # noqa: E402

# AI Matrix's TF graphs that torchvision lacks: aim's parity peers (tests/peers/aimatrix_cnn.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "peers"))
import aimatrix_cnn  # noqa: E402

AIMATRIX = ("googlenet", "synnet")

MODELS = {"resnet50": torchvision.models.resnet50, "resnet152": torchvision.models.resnet152,
          "vgg16": torchvision.models.vgg16, "alexnet": torchvision.models.alexnet,
          "squeezenet": torchvision.models.squeezenet1_1, "densenet121": torchvision.models.densenet121}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS) + list(AIMATRIX), default="resnet50")
    ap.add_argument("--mode", choices=["train", "infer"], required=True)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--steps", type=int, default=10, help="timed training steps")
    ap.add_argument("--iters", type=int, default=10, help="timed inference batches")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--channels-last", action="store_true", help="NHWC memory format (oneDNN's favourite)")
    ap.add_argument("--foreach", action="store_true")
    ap.add_argument("--no-set-to-none", action="store_true")
    ap.add_argument("--jit", action="store_true", help="infer: trace + freeze + optimize_for_inference")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model (torch >= 2.0, Inductor, default mode); it compiles in the "
                         "first, untimed warm-up iteration")
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--profile-top", type=int, default=12)
    a = ap.parse_args()
    if a.compile and not hasattr(torch, "compile"):
        ap.error("--compile needs torch >= 2.0 (this is %s)" % torch.__version__)
    if a.compile and a.jit:
        ap.error("--compile and --jit are two ways of compiling: choose one")
    if a.compile and a.warmup < 1:
        ap.error("--compile needs --warmup >= 1 (the compilation is not timed)")
    for name in ("batch_size", "steps", "iters", "threads", "image"):
        if getattr(a, name) <= 0:
            ap.error("--%s must be > 0" % name.replace("_", "-"))
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.model in AIMATRIX:
        model = aimatrix_cnn.build(a.model, 1000, a.image, False)
    else:
        model = MODELS[a.model](num_classes=1000)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    g = torch.Generator().manual_seed(a.seed)
    batches = [(torch.randn(a.batch_size, 3, a.image, a.image, generator=g).to(memory_format=fmt),
                torch.randint(0, 1000, (a.batch_size,), generator=g)) for _ in range(2)]
    times = []
    if a.mode == "train":
        model.train()
        opt = make_optimizer(a.optimizer, model.parameters(), a.lr, a.foreach)
        if a.optimizer == "sgd":  # momentum SGD, as the CNN recipes (MODELS.md §2.1) and aim's run
            opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
        net = torch.compile(model) if a.compile else model

        def step(i):
            x, y = batches[i % len(batches)]
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=not a.no_set_to_none)
            return float(loss)
        fn, n, key = step, a.steps, "step_time_ms"
    else:
        model.eval()
        fwd = model
        if a.jit:
            with torch.no_grad():
                fwd = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(model, batches[0][0])))
        elif a.compile:
            fwd = torch.compile(model)

        def step(i):
            with torch.inference_mode():
                return float(fwd(batches[i % len(batches)][0]).sum())
        fn, n, key = step, a.iters, "latency_ms"
    for i in range(a.warmup + n):
        t0 = time.perf_counter()
        v = fn(i)
        dt = (time.perf_counter() - t0) * 1e3
        if not math.isfinite(v):
            raise SystemExit("cnn.py: non-finite value at iteration %d" % i)
        if i >= a.warmup:
            times.append(dt)
    prof = profile(a, fn)
    p50 = percentile(times, 50)
    r = {"framework": "pytorch", "model": a.model, "mode": a.mode, "batch": a.batch_size, "image": a.image,
         "threads": a.threads, "channels_last": a.channels_last, "compile": a.compile,
         key: {"p50": p50, "p90": percentile(times, 90), "p99": percentile(times, 99),
               "mean": sum(times) / len(times)},
         "throughput": a.batch_size / p50 * 1e3, "throughput_unit": "images/s",
         "iterations": len(times), "warmup": a.warmup, "env": environment(a)}
    if prof is not None:
        r["profile"] = prof
    r["memory"] = memory()
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
