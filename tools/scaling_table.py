#!/usr/bin/env python3
"""Expected data-parallel scaling per model (docs/scaling.md), from the real parameter sizes.

Usage: tools/scaling_table.py BUILD_DIR [--measure-cpu] [--update docs/scaling.md]

--update replaces the text between the "<!-- scaling_table begin -->" and "<!-- scaling_table
end -->" lines of that file with the tables (without it they are printed).

For each model, `aim-train M --dist-plan` (train/trainer.h data_parallel_plan) gives the parameter
count, the dense gradient bytes of a step, the Reducer's bucket plan at --bucket-mb 25, the rows of
each embedding table one step touches, and the analytic training FLOPs at the per-GPU batch below.
From these the script computes, for 8 GPUs:

  all-reduce time  = sum over buckets of (2 (N-1)/N * bucket bytes / bandwidth + latency)   (ring)
  GPU step time    = max(0.5 ms, training FLOPs / (peak * efficiency))   (ESTIMATE, see below)
  exposed comm     = max(last bucket's time, all-reduce time - backward time)
                     (buckets overlap backward, ~2/3 of the step; the last bucket -- the first
                     layers' gradients, ready when backward ends -- cannot)
  efficiency       = step / (step + exposed comm)

and, for the recommenders, the sparse alternative: an all-gather of the touched rows (indices and
rows, (N-1) * rows * row bytes / bandwidth) instead of the tables' dense all-reduce.

--measure-cpu also runs each model for a few steps on this machine's CPU and reports the measured
step time (aim-train --results step_time_ms.p50) at a small batch.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

N = 8  # GPUs
LINKS = [  # name, bytes/s per direction per GPU, latency per all-reduce call (s)
    ("NVLink (H100/H200, 450 GB/s)", 450e9, 25e-6),
    ("PCIe Gen5 x16 (50 GB/s)", 50e9, 40e-6),
    ("IB NDR 400 Gb/s across nodes (50 GB/s)", 50e9, 60e-6),
]
# GPU step times are ESTIMATES: H100/H200 SXM dense BF16 tensor-core peak 989 TFLOP/s (datasheet)
# at an assumed fraction of peak for mixed-precision training, by kind of model.
PEAK = 989e12
EFFICIENCY = {
    "cv": 0.35,  # large convolutions and GEMMs
    "rec": 0.03,  # small GEMMs, gathers, many short kernels: launch and memory bound
    "crnn": 0.15,  # convolutions plus a sequential LSTM
}
# Per-GPU batch of each model (the AI Matrix recipes' order of magnitude) and config.
MODELS = [
    ("din", "rec", 1024, []),
    ("dien", "rec", 128, []),
    ("ncf", "rec", 2048, []),
    ("wide_deep", "rec", 1024, []),
    ("resnet50", "cv", 128, []),
    ("resnet152", "cv", 64, []),
    ("vgg16", "cv", 64, []),
    ("googlenet", "cv", 128, []),
    ("densenet121", "cv", 64, []),
    ("crnn", "crnn", 64, []),
]
CPU_BATCH = {"rec": 256, "cv": 2, "crnn": 8}
# A GPU training step is at least its kernel launches: ~100 kernels of ~5 us for the small models
# (ESTIMATE), whatever their FLOPs.
STEP_FLOOR = 0.5e-3


def plan(build, model, batch, config):
    cmd = [os.path.join(build, "aim-train"), model, "--dist-plan", "--batch-size", str(batch),
           "--bucket-mb", "25", "--threads", "1"]
    for c in config:
        cmd += ["--config", c]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), p.stderr))
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure_cpu(build, model, batch, config):
    with tempfile.TemporaryDirectory() as tmp:
        res = os.path.join(tmp, "r.jsonl")
        cmd = [os.path.join(build, "aim-train"), model, "--device", "cpu", "--steps", "3",
               "--batch-size", str(batch), "--eval-samples", "100" if model == "ncf" else "8",
               "--eval-every", "0",
               "--progress", "lines", "--results", res]
        for c in config:
            cmd += ["--config", c]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return None
        with open(res) as f:
            j = json.loads(f.readlines()[-1])
        return j["step_time_ms"]["p50"] / 1e3


def ring(bytes_, bw, lat):
    return 2 * (N - 1) / N * bytes_ / bw + lat


def mb(b):
    return b / 2**20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--measure-cpu", action="store_true")
    ap.add_argument("--update")
    a = ap.parse_args()
    rows = []
    for model, kind, batch, config in MODELS:
        p = plan(a.build, model, batch, config)
        step = max(STEP_FLOOR, p["train_flops_per_step"] / (PEAK * EFFICIENCY[kind]))
        r = {"p": p, "kind": kind, "step": step, "links": []}
        for name, bw, lat in LINKS:
            times = [ring(b, bw, lat) for b in p["bucket_bytes"]]
            total = sum(times)
            bwd = step * 2 / 3
            # Launch order is bucket order: the last bucket in the list is launched last.
            exposed = max(times[-1] if times else 0, total - bwd)
            sparse = None
            if p["embedding_tables"]:
                dense_tables = sum(t["bytes"] for t in p["embedding_tables"])
                rows_bytes = sum(t["rows_touched"] * (t["cols"] * 4 + 8) for t in p["embedding_tables"])
                sparse = (ring(dense_tables, bw, 0), (N - 1) * rows_bytes / bw + lat)
            r["links"].append({"name": name, "allreduce": total, "exposed": exposed,
                               "eff": step / (step + exposed), "eff_no_overlap": step / (step + total),
                               "sparse": sparse})
        if a.measure_cpu:
            cb = CPU_BATCH[kind]
            r["cpu"] = (cb, measure_cpu(a.build, model, cb, config))
        rows.append(r)

    out = []
    w = out.append
    w("### Gradient bytes and bucket plan (--bucket-mb 25, first bucket 1 MB)")
    w("")
    w("| model | per-GPU batch | parameters | dense gradient MB/step | buckets (MB, launch order) | embedding tables (rows touched / rows) | training GFLOP/step |")
    w("|---|---|---|---|---|---|---|")
    for r in rows:
        p = r["p"]
        tables = ", ".join("%s %d / %d" % (t["name"], t["rows_touched"], t["rows"]) for t in p["embedding_tables"]) or "-"
        bk = ", ".join("%.1f" % mb(b) for b in p["bucket_bytes"])
        w("| %s | %d | %.2f M | %.1f | %d: %s | %s | %.0f |" % (
            p["model"], p["batch"], p["parameters"] / 1e6, mb(p["grad_bytes"]), len(p["bucket_bytes"]), bk,
            tables, p["train_flops_per_step"] / 1e9))
    w("")
    w("### Expected all-reduce time and scaling efficiency at 8 GPUs")
    w("")
    w("GPU step time = training FLOPs / (989 TFLOP/s BF16 dense x efficiency: cv %.0f%%, rec %.0f%%, crnn %.0f%%) -- "
      "at least %.1f ms (kernel launches) -- **estimates**, not measurements. All-reduce: ring, 2(N-1)/N x bytes / bandwidth + latency per bucket "
      "(%s). Efficiency = step / (step + exposed communication); in brackets without overlap." % (
          100 * EFFICIENCY["cv"], 100 * EFFICIENCY["rec"], 100 * EFFICIENCY["crnn"], STEP_FLOOR * 1e3,
          ", ".join("%s %.0f us" % (n.split(" (")[0], l * 1e6) for n, _, l in LINKS)))
    w("")
    head = "| model | GPU step (est.) |"
    for name, _, _ in LINKS:
        head += " %s: all-reduce / exposed / efficiency |" % name
    w(head)
    w("|---|---|" + "---|" * len(LINKS))
    for r in rows:
        line = "| %s | %.1f ms |" % (r["p"]["model"], r["step"] * 1e3)
        for l in r["links"]:
            line += " %.1f ms / %.1f ms / %.0f%% (%.0f%%) |" % (l["allreduce"] * 1e3, l["exposed"] * 1e3,
                                                             100 * l["eff"], 100 * l["eff_no_overlap"])
        w(line)
    w("")
    if any(r["p"]["embedding_tables"] for r in rows):
        w("### Recommenders: dense all-reduce of the embedding tables vs the sparse exchange of touched rows")
        w("")
        w("| model | " + " | ".join("%s: dense tables / sparse rows" % n for n, _, _ in LINKS) + " |")
        w("|---|" + "---|" * len(LINKS))
        for r in rows:
            if not r["p"]["embedding_tables"]:
                continue
            w("| %s | " % r["p"]["model"] + " | ".join("%.2f ms / %.2f ms" % (l["sparse"][0] * 1e3, l["sparse"][1] * 1e3)
                                                     for l in r["links"]) + " |")
        w("")
    if a.measure_cpu:
        w("### CPU step time measured on this machine (aim-train --device cpu, 3 steps, p50)")
        w("")
        w("| model | batch | step | per sample |")
        w("|---|---|---|---|")
        for r in rows:
            cb, t = r["cpu"]
            if t is None:
                w("| %s | %d | failed | |" % (r["p"]["model"], cb))
            else:
                w("| %s | %d | %.0f ms | %.2f ms |" % (r["p"]["model"], cb, t * 1e3, t * 1e3 / cb))
        w("")
    text = "\n".join(out)
    if a.update:
        begin, end = "<!-- scaling_table begin -->", "<!-- scaling_table end -->"
        with open(a.update) as f:
            doc = f.read()
        if begin not in doc or end not in doc:
            sys.exit("%s: no %s ... %s lines to replace" % (a.update, begin, end))
        i, j = doc.index(begin) + len(begin), doc.index(end)
        doc = doc[:i] + "\n<!-- generated by tools/scaling_table.py; do not edit by hand -->\n\n" + text + "\n" + doc[j:]
        with open(a.update, "w") as f:
            f.write(doc)
    print(text)


if __name__ == "__main__":
    main()
