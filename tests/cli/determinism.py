#!/usr/bin/env python3
"""Bit-identity of CPU runs across reruns and OpenMP thread counts (docs/determinism.md).

Usage: determinism.py BUILD_DIR [--models m1,m2,...|all] [--threads 1,2] [--steps N] [--infer]
                      [--mode auto|default|deterministic] [--table]

For each model: a tiny training run (fixed --seed, a few steps, --save-weights) at each thread
count and once more at the last one (a rerun), then an inference run (--dump-outputs) at each
thread count. The weights and the outputs are compared tensor by tensor, bit for bit. Exit 1 when
any pair differs, naming the model, the run and the first differing tensor with its largest
difference. --table prints one markdown row per model (docs/determinism.md's table). --mode:
default (no flag), deterministic (--deterministic everywhere), auto (the test: --deterministic for
the models with convolutions, whose filter gradients need it, none for the others).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

# Per-model settings that keep each run to about a second or two: the tiny configuration, a small
# batch and few evaluation samples (evaluation only at the end).
TINY = ["--config", "size=tiny"]
MODELS = {
    "din": TINY + ["--batch-size", "64"],
    "ncf": TINY + ["--batch-size", "128"],
    "dien": TINY + ["--batch-size", "32"],
    "wide_deep": TINY + ["--batch-size", "128"],
    "resnet50": TINY + ["--batch-size", "4"],
    "resnet152": TINY + ["--batch-size", "2"],
    "vgg16": TINY + ["--batch-size", "4"],
    "alexnet": TINY + ["--config", "image=64", "--batch-size", "4"],
    "squeezenet": TINY + ["--config", "image=48", "--batch-size", "4"],
    "googlenet": TINY + ["--config", "image=64", "--batch-size", "4"],
    "densenet121": TINY + ["--batch-size", "2"],
    "synnet": TINY + ["--batch-size", "2"],
    "crnn": TINY + ["--batch-size", "8"],
    "bert": TINY + ["--batch-size", "4"],
    "ssd_vgg16": TINY + ["--batch-size", "2"],
    "seglink": TINY + ["--batch-size", "2"],
    "dssd": TINY + ["--batch-size", "1"],
    "ssd_resnet34": TINY + ["--batch-size", "2"],
    "ssd_resnet18": TINY + ["--batch-size", "2"],
    "cpn": TINY + ["--batch-size", "2"],
    "faster_rcnn": TINY + ["--batch-size", "1"],
    "gcn": TINY,
    "deepspeech": TINY + ["--batch-size", "8"],
    "mask_rcnn": TINY + ["--batch-size", "1"],
    "nmt": TINY + ["--batch-size", "16"],
}
# The test's default set: one of each kind of model, about half a minute on two cores.
DEFAULT = ["din", "dien", "ncf", "wide_deep", "squeezenet", "crnn", "bert", "gcn", "nmt"]
# Models whose training runs convolution filter gradients: their default CPU variants sum the
# images per thread, so training is bit-identical across --threads only with --deterministic
# (docs/determinism.md). Inference of every model is, and training of the others, by default.
CONV = {"resnet50", "resnet152", "vgg16", "alexnet", "squeezenet", "googlenet", "densenet121",
        "synnet", "crnn", "ssd_vgg16", "seglink", "dssd", "ssd_resnet34", "ssd_resnet18", "cpn",
        "faster_rcnn", "mask_rcnn"}


def read_safetensors(path):
    """name -> (dtype, shape, raw bytes)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        out[name] = (info["dtype"], tuple(info["shape"]), blob[base + lo : base + hi])
    return out


def max_diff(dtype, a, b):
    fmt = {"F32": "f", "F64": "d", "I64": "q", "I32": "i"}.get(dtype)
    if fmt is None:
        return "bytes differ"
    size = struct.calcsize(fmt)
    va = struct.unpack("<%d%s" % (len(a) // size, fmt), a)
    vb = struct.unpack("<%d%s" % (len(b) // size, fmt), b)
    worst, where, count = 0.0, -1, 0
    for i, (x, y) in enumerate(zip(va, vb)):
        if x != y and not (x != x and y != y):
            count += 1
            d = abs(x - y)
            if d >= worst:
                worst, where = d, i
    return "%d of %d elements differ, largest difference %.3g at %d" % (count, len(va), worst, where)


def compare(a_path, b_path):
    """'' when every tensor is bit-identical, else what differs first."""
    a, b = read_safetensors(a_path), read_safetensors(b_path)
    if sorted(a) != sorted(b):
        return "different tensor names: %s" % sorted(set(a) ^ set(b))
    diffs = []
    for name in sorted(a):
        if a[name] != b[name]:
            diffs.append((name, a[name][0], a[name][2], b[name][2]))
    if not diffs:
        return ""
    name, dtype, x, y = diffs[0]
    return "%d of %d tensors differ; first %s: %s" % (len(diffs), len(a), name, max_diff(dtype, x, y))


def run(cmd, what):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s" % (what, p.returncode, (p.stdout + p.stderr)[-3000:]))
    return time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--models", default=",".join(DEFAULT))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--infer", action="store_true", help="also compare aim-infer outputs")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--extra", default="", help="more aim-train/aim-infer flags, space-separated")
    ap.add_argument("--mode", default="auto", choices=["auto", "default", "deterministic"])
    args = ap.parse_args()
    train = os.path.join(args.build, "aim-train")
    infer = os.path.join(args.build, "aim-infer")
    models = list(MODELS) if args.models == "all" else args.models.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    extra = args.extra.split()
    failures, rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            if m not in MODELS:
                sys.exit("unknown model %s (known: %s)" % (m, ", ".join(MODELS)))
            det = args.mode == "deterministic" or (args.mode == "auto" and m in CONV)
            base = MODELS[m] + ["--device", "cpu", "--seed", "7"] + extra
            if det:
                base.append("--deterministic")
            tcmd = [train, m] + base + ["--steps", str(args.steps), "--eval-every", "0",
                                        "--eval-samples", "200", "--progress", "lines",
                                        "--prefetch", "0"]
            icmd = [infer, m] + base + ["--iters", "1", "--warmup", "0"]
            w = {}
            secs = 0.0
            row = {"model": m, "flag": "--deterministic" if det else "-"}
            try:
                for t in threads:
                    w[t] = os.path.join(tmp, "%s_t%d.safetensors" % (m, t))
                    secs += run(tcmd + ["--threads", str(t), "--save-weights", w[t]],
                                "%s train --threads %d" % (m, t))
                last = threads[-1]
                rerun = os.path.join(tmp, "%s_t%d_rerun.safetensors" % (m, last))
                secs += run(tcmd + ["--threads", str(last), "--save-weights", rerun],
                            "%s train rerun --threads %d" % (m, last))
                d = compare(w[last], rerun)
                row["rerun"] = d or "identical"
                if d:
                    failures.append("%s: training rerun at %d threads: %s" % (m, last, d))
                row["threads"] = "identical"
                for t in threads[1:]:
                    d = compare(w[threads[0]], w[t])
                    if d:
                        row["threads"] = d
                        failures.append("%s: training at %d vs %d threads: %s" %
                                        (m, threads[0], t, d))
                if args.infer:
                    o = {}
                    for t in threads:
                        o[t] = os.path.join(tmp, "%s_out_t%d.safetensors" % (m, t))
                        secs += run(icmd + ["--threads", str(t), "--dump-outputs", o[t]],
                                    "%s infer --threads %d" % (m, t))
                    row["infer"] = "identical"
                    for t in threads[1:]:
                        d = compare(o[threads[0]], o[t])
                        if d:
                            row["infer"] = d
                            failures.append("%s: inference at %d vs %d threads: %s" %
                                            (m, threads[0], t, d))
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                failures.append(str(e))
                row["error"] = str(e).splitlines()[0]
            row["seconds"] = round(secs, 1)
            rows.append(row)
            print("%-13s %-15s %5.1fs  rerun: %s | threads %s: %s%s" %
                  (m, row["flag"], secs, row.get("rerun", "-"), args.threads, row.get("threads", "-"),
                   (" | infer: " + row["infer"]) if "infer" in row else
                   (" | " + row["error"] if "error" in row else "")), flush=True)
    if args.table:
        for r in rows:
            print("| %s | %s | %s | %s | %s |" % (r["model"], r["flag"],
                                                   r.get("rerun", r.get("error", "-")),
                                                   r.get("threads", "-"), r.get("infer", "-")))
    if failures:
        print("\nFAILED:\n" + "\n".join(failures))
        return 1
    print("all bit-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
